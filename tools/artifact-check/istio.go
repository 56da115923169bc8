// Istio DestinationRules and VirtualServices are checked as Istio checks them when they are
// applied, without a cluster:
//
//  1. the object: apiVersion networking.istio.io/v1 (v1beta1 and v1alpha3, which Istio serves
//     too, are accepted), kind DestinationRule or VirtualService, and no field besides
//     apiVersion, kind, metadata (strictly decoded into Kubernetes' ObjectMeta) and spec; the
//     name a DNS-1123 subdomain and the namespace a DNS-1123 label, as the API server requires;
//  2. the spec: Istio's own strict reader (istio.io/istio/pkg/util/protomarshal.ApplyJSONStrict,
//     golang/protobuf's jsonpb into the istio.io/api message): unknown fields, wrongly typed
//     values and unparsable durations are errors (YAML is converted to JSON first, as the API
//     server does);
//  3. Istio's own validation, the code istiod's validating webhook runs
//     (istio.io/istio/pkg/config/validation: ValidateDestinationRule, ValidateVirtualService):
//     durations of at least 1ms and whole milliseconds, attempts >= 0, known retryOn tokens,
//     connection pool limits >= 0, maxEjectionPercent and minHealthPercent in 0..100, hosts,
//     routes. Its warnings fail the check too: rbl's files should draw none.
//
// Not covered: the CRD's OpenAPI schema and its CEL rules, which only the API server applies
// (what they check, step 3 checks as well).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/schema/gvk"
	"istio.io/istio/pkg/config/validation"
	"istio.io/istio/pkg/util/protomarshal"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// The group versions Istio serves its networking kinds under (v1 is the one rbl writes).
var istioVersions = map[string]bool{
	"networking.istio.io/v1": true, "networking.istio.io/v1beta1": true, "networking.istio.io/v1alpha3": true,
}

// istioObject is a whole document: any other top-level field is an error.
type istioObject struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       json.RawMessage   `json:"spec"`
}

func validateIstioFile(path string) []error {
	file, err := os.Open(path)
	if err != nil {
		return []error{err}
	}
	defer file.Close()
	reader := k8syaml.NewYAMLReader(bufio.NewReader(file))
	var errs []error
	documents := 0
	for number := 1; ; number++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return append(errs, fmt.Errorf("document %d: not YAML: %w", number, err))
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue // a stream may begin or end with `---` or hold only comments
		}
		documents++
		for _, err := range validateIstioDocument(doc) {
			errs = append(errs, fmt.Errorf("document %d: %w", number, err))
		}
	}
	if documents == 0 {
		errs = append(errs, errors.New("no Istio object in the file"))
	}
	return errs
}

func stripComments(doc []byte) []byte {
	var kept []string
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			kept = append(kept, line)
		}
	}
	return []byte(strings.Join(kept, "\n"))
}

func validateIstioDocument(doc []byte) []error {
	jsonBytes, err := yaml.YAMLToJSONStrict(doc) // strict: a key given twice is an error
	if err != nil {
		return []error{fmt.Errorf("not YAML: %w", err)}
	}
	var object istioObject
	decoder := json.NewDecoder(bytes.NewReader(jsonBytes))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&object); err != nil {
		return []error{fmt.Errorf("not an Istio object: %w", err)}
	}
	if !istioVersions[object.APIVersion] {
		return []error{fmt.Errorf("apiVersion %q is not networking.istio.io/v1", object.APIVersion)}
	}
	errs := validateMetadata(object.Metadata)
	if len(object.Spec) == 0 {
		return append(errs, fmt.Errorf("%s %q has no spec", object.Kind, object.Metadata.Name))
	}
	meta := config.Meta{Name: object.Metadata.Name, Namespace: object.Metadata.Namespace,
		Labels: object.Metadata.Labels, Annotations: object.Metadata.Annotations}
	var spec proto.Message
	var validate validation.ValidateFunc
	switch object.Kind {
	case "DestinationRule":
		meta.GroupVersionKind, spec, validate = gvk.DestinationRule, &networking.DestinationRule{}, validation.ValidateDestinationRule
	case "VirtualService":
		meta.GroupVersionKind, spec, validate = gvk.VirtualService, &networking.VirtualService{}, validation.ValidateVirtualService
	default:
		return append(errs, fmt.Errorf("kind %q is not DestinationRule or VirtualService", object.Kind))
	}
	where := fmt.Sprintf("%s %q", object.Kind, object.Metadata.Name)
	if err := protomarshal.ApplyJSONStrict(string(object.Spec), spec); err != nil {
		return append(errs, fmt.Errorf("%s: spec does not match istio.io/api networking.%s: %w", where, object.Kind, err))
	}
	warnings, err := validate(config.Config{Meta: meta, Spec: spec})
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %s", where, oneLine(err)))
	}
	if warnings != nil {
		errs = append(errs, fmt.Errorf("%s: warning: %s", where, oneLine(warnings)))
	}
	return errs
}

// oneLine joins a multierror's list ("2 errors occurred:\n\t* a\n\t* b") into "a; b".
func oneLine(err error) string {
	var items []string
	for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
		line = strings.TrimSpace(line)
		if item, ok := strings.CutPrefix(line, "* "); ok {
			items = append(items, item)
		} else if line != "" && !strings.HasSuffix(line, "occurred:") {
			items = append(items, line)
		}
	}
	return strings.Join(items, "; ")
}

func validateMetadata(meta metav1.ObjectMeta) []error {
	var errs []error
	if meta.Name == "" {
		return append(errs, errors.New("metadata.name is missing"))
	}
	for _, problem := range k8svalidation.IsDNS1123Subdomain(meta.Name) {
		errs = append(errs, fmt.Errorf("metadata.name %q: %s", meta.Name, problem))
	}
	if meta.Namespace != "" {
		for _, problem := range k8svalidation.IsDNS1123Label(meta.Namespace) {
			errs = append(errs, fmt.Errorf("metadata.namespace %q: %s", meta.Namespace, problem))
		}
	}
	for key, value := range meta.Labels {
		for _, problem := range append(k8svalidation.IsQualifiedName(key), k8svalidation.IsValidLabelValue(value)...) {
			errs = append(errs, fmt.Errorf("label %q: %s", key, problem))
		}
	}
	for key := range meta.Annotations {
		for _, problem := range k8svalidation.IsQualifiedName(key) {
			errs = append(errs, fmt.Errorf("annotation %q: %s", key, problem))
		}
	}
	return errs
}
