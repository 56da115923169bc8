// Envoy bootstraps are checked the way Envoy checks its config at start-up,
// without needing an Envoy binary (none exists on rbl's development and CI machines):
//
//  1. strict proto3 JSON mapping into envoy.config.bootstrap.v3.Bootstrap: unknown fields,
//     misspelled enum names and wrongly typed values are errors (YAML is converted to JSON first,
//     as Envoy does);
//  2. protoc-gen-validate constraints (ValidateAll) on the bootstrap and on every
//     google.protobuf.Any typed_config inside it, unpacked recursively: PGV does not descend
//     into Any, Envoy does when it instantiates each extension.
//
// Only the extensions imported below are known; a typed_config of any other type is rejected,
// like an Envoy build without that extension would.
package main

import (
	"errors"
	"fmt"
	"os"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/adaptive_concurrency/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/admission_control/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"sigs.k8s.io/yaml"
)

type allValidator interface{ ValidateAll() error }

func validateEnvoyFile(path string) []error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return []error{err}
	}
	jsonBytes, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return []error{fmt.Errorf("not YAML: %w", err)}
	}
	var bootstrap bootstrapv3.Bootstrap
	strict := protojson.UnmarshalOptions{DiscardUnknown: false}
	if err := strict.Unmarshal(jsonBytes, &bootstrap); err != nil {
		return []error{fmt.Errorf("does not match envoy.config.bootstrap.v3.Bootstrap: %w", err)}
	}
	var errs []error
	if err := bootstrap.ValidateAll(); err != nil {
		errs = append(errs, err)
	}
	return append(errs, validateAnys(bootstrap.ProtoReflect(), "bootstrap")...)
}

// validateAnys finds every Any below msg, unpacks it into its registered type, validates it
// and descends into it.
func validateAnys(msg protoreflect.Message, where string) []error {
	var errs []error
	msg.Range(func(field protoreflect.FieldDescriptor, value protoreflect.Value) bool {
		at := where + "." + string(field.Name())
		switch {
		case field.IsList() && field.Message() != nil:
			list := value.List()
			for i := 0; i < list.Len(); i++ {
				errs = append(errs, visit(list.Get(i).Message(), fmt.Sprintf("%s[%d]", at, i))...)
			}
		case field.IsMap() && field.MapValue().Message() != nil:
			value.Map().Range(func(key protoreflect.MapKey, v protoreflect.Value) bool {
				errs = append(errs, visit(v.Message(), fmt.Sprintf("%s[%v]", at, key))...)
				return true
			})
		case field.Message() != nil && !field.IsMap():
			errs = append(errs, visit(value.Message(), at)...)
		}
		return true
	})
	return errs
}

func visit(msg protoreflect.Message, where string) []error {
	anyMsg, isAny := msg.Interface().(*anypb.Any)
	if !isAny {
		return validateAnys(msg, where)
	}
	inner, err := anyMsg.UnmarshalNew()
	if err != nil {
		return []error{fmt.Errorf("%s: typed_config %q: %w", where, anyMsg.GetTypeUrl(), err)}
	}
	var errs []error
	if v, ok := inner.(allValidator); ok {
		if err := v.ValidateAll(); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", where, proto.MessageName(inner), err))
		}
	} else {
		errs = append(errs, errors.New(where+": "+string(proto.MessageName(inner))+" has no validation rules"))
	}
	return append(errs, validateAnys(inner.ProtoReflect(), where)...)
}
