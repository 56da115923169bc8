package config

import (
	"strings"
	"testing"
)

func TestParseReadsAFullConfiguration(t *testing.T) {
	c, err := Parse([]byte(`{"service": "frontend", "replica": 2,
		"work": {"kind": "factorial", "n": 1000},
		"calls": [{"service": "recommendation", "times": 1, "parallel": false},
		          {"service": "productcatalog", "times": 4, "parallel": true}],
		"outbound": "127.0.0.1:15001"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Service != "frontend" || c.Replica != 2 || c.Work.Kind != WorkFactorial || *c.Work.N != 1000 ||
		c.Outbound != "127.0.0.1:15001" || len(c.Calls) != 2 {
		t.Fatalf("read %+v", c)
	}
	if c.Calls[1] != (Call{Service: "productcatalog", Times: 4, Parallel: true}) {
		t.Fatalf("second call %+v", c.Calls[1])
	}
}

func TestParseAcceptsALeafWithNoOutbound(t *testing.T) {
	for _, work := range []string{`{"kind": "none"}`, `{"kind": "sleep", "ms": 5}`, `{"kind": "factorial", "n": 0}`} {
		if _, err := Parse([]byte(`{"service": "leaf", "work": ` + work + `}`)); err != nil {
			t.Errorf("%s: %v", work, err)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	leaf := func(work string) string { return `{"service": "leaf", "work": ` + work + `}` }
	calling := func(calls, outbound string) string {
		return `{"service": "front", "work": {"kind": "none"}, "calls": ` + calls + `, "outbound": "` + outbound + `"}`
	}
	cases := []struct{ name, input, says string }{
		{"not JSON", `{"service": `, "not a configuration"},
		{"trailing data", leaf(`{"kind": "none"}`) + ` {}`, "more after the JSON object"},
		{"unknown field", `{"service": "leaf", "work": {"kind": "none"}, "parralel": true}`, "unknown field"},
		{"no service", `{"work": {"kind": "none"}}`, "service:"},
		{"a slash in the name", `{"service": "a/b", "work": {"kind": "none"}}`, "not a service name"},
		{"negative replica", `{"service": "leaf", "replica": -1, "work": {"kind": "none"}}`, "replica"},
		{"no work", `{"service": "leaf"}`, "kind must be"},
		{"unknown kind", leaf(`{"kind": "spin"}`), "kind must be"},
		{"factorial without n", leaf(`{"kind": "factorial"}`), "factorial needs n"},
		{"factorial with ms", leaf(`{"kind": "factorial", "n": 3, "ms": 3}`), "not ms"},
		{"negative n", leaf(`{"kind": "factorial", "n": -1}`), "factorial needs n"},
		{"n too large", leaf(`{"kind": "factorial", "n": 1000001}`), "factorial needs n"},
		{"sleep without ms", leaf(`{"kind": "sleep"}`), "sleep needs ms"},
		{"sleep with n", leaf(`{"kind": "sleep", "n": 3, "ms": 1}`), "not n"},
		{"none with n", leaf(`{"kind": "none", "n": 3}`), "neither"},
		{"fractional n", leaf(`{"kind": "factorial", "n": 1.5}`), "not a configuration"},
		{"zero times", calling(`[{"service": "b", "times": 0}]`, "127.0.0.1:1"), "times must be"},
		{"too many times", calling(`[{"service": "b", "times": 1001}]`, "127.0.0.1:1"), "times must be"},
		{"a call to itself", calling(`[{"service": "front", "times": 1}]`, "127.0.0.1:1"), "front calls itself"},
		{"a call with no service", calling(`[{"times": 1}]`, "127.0.0.1:1"), "calls[0]: service"},
		{"calls without outbound", calling(`[{"service": "b", "times": 1}]`, ""), "outbound"},
		{"outbound without port", calling(`[{"service": "b", "times": 1}]`, "127.0.0.1"), "not HOST:PORT"},
		{"outbound port 0", calling(`[{"service": "b", "times": 1}]`, "127.0.0.1:0"), "port must be"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an error saying %q", err, tc.says)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("not one line: %q", err)
			}
		})
	}
}

func TestCheckListenRefusesWhatIsNotLoopback(t *testing.T) {
	for _, address := range []string{"127.0.0.1:8080", "127.0.0.2:0", "[::1]:80", "localhost:9000", "LOCALHOST:1"} {
		if err := CheckListen(address, false); err != nil {
			t.Errorf("%s: %v", address, err)
		}
	}
	for _, address := range []string{"0.0.0.0:8080", ":8080", "[::]:80", "10.0.0.1:80", "example.com:80"} {
		if err := CheckListen(address, false); err == nil || !strings.Contains(err.Error(), "--any-address") {
			t.Errorf("%s: got %v, want a refusal naming --any-address", address, err)
		}
		if err := CheckListen(address, true); err != nil {
			t.Errorf("%s with --any-address: %v", address, err)
		}
	}
	for _, address := range []string{"", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000"} {
		if err := CheckListen(address, true); err == nil {
			t.Errorf("%q: accepted", address)
		}
	}
}
