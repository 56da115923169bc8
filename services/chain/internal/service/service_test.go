package service

import (
	"encoding/json"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"rbl.dev/chain/internal/config"
)

const token = "run-token-1"

func TestFailedAt(t *testing.T) {
	cases := []struct {
		name              string
		status            int
		downstream, flags string
		want              string
	}{
		{"deeper failure passed up unchanged", 503, "productcatalog/UO", "URX", "productcatalog/UO"},
		{"deeper failure of a plain status", 500, "db/status-503", "", "db/status-503"},
		{"the sidecar's flags", 503, "", "UO", "cart/UO"},
		{"two flags, as Envoy joins them", 503, "", "URX,UF", "cart/URX,UF"},
		{"no flags: the status", 503, "", "", "cart/status-503"},
		{"a dash is no flags", 404, "", "-", "cart/status-404"},
		{"no answer", 0, "", "", "cart/transport"},
	}
	for _, tc := range cases {
		if got := FailedAt("cart", tc.status, tc.downstream, tc.flags); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFactorial(t *testing.T) {
	want := new(big.Int).MulRange(1, 300)
	if Factorial(300).Cmp(want) != 0 || Factorial(0).Int64() != 1 || Factorial(1).Int64() != 1 || Factorial(5).Int64() != 120 {
		t.Fatal("not n!")
	}
}

// downstream is a called service's stand-in that records the Host of each request and answers
// what its answer function says.
type downstream struct {
	server *httptest.Server
	mu     sync.Mutex
	hosts  []string
	count  atomic.Int64
}

func newDownstream(t *testing.T, answer func(n int64, w http.ResponseWriter)) *downstream {
	d := &downstream{}
	d.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.hosts = append(d.hosts, r.Host+" "+r.Method+" "+r.URL.Path)
		d.mu.Unlock()
		answer(d.count.Add(1), w)
	}))
	t.Cleanup(d.server.Close)
	return d
}

func ok(int64, http.ResponseWriter) {}

func newService(t *testing.T, raw string) *Service {
	t.Helper()
	c, err := config.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	s := New(c, token)
	t.Cleanup(s.Close)
	return s
}

func serve(s *Service, method, path string, headers map[string]string, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for name, value := range headers {
		r.Header.Set(name, value)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

func stats(t *testing.T, s *Service) Snapshot {
	t.Helper()
	w := serve(s, "GET", "/rbl/stats", map[string]string{TargetHeader: token}, "")
	var snap Snapshot
	if err := json.Unmarshal(w.Body.Bytes(), &snap); w.Code != 200 || err != nil {
		t.Fatalf("stats: %d %v", w.Code, err)
	}
	return snap
}

func putFault(t *testing.T, s *Service, body string) {
	t.Helper()
	if w := serve(s, "PUT", "/rbl/fault", map[string]string{TargetHeader: token}, body); w.Code != 200 {
		t.Fatalf("PUT /rbl/fault: %d %s", w.Code, w.Body)
	}
}

func chainConfig(outbound string, calls string) string {
	return `{"service": "front", "work": {"kind": "none"}, "calls": ` + calls + `, "outbound": "` + outbound + `"}`
}

func TestALeafDoesItsWorkAndAnswersWithTheToken(t *testing.T) {
	s := newService(t, `{"service": "leaf", "replica": 3, "work": {"kind": "factorial", "n": 2000}}`)
	for range 3 {
		w := serve(s, "POST", "/any/path?q=1", nil, "body")
		if w.Code != 200 || w.Header().Get(TargetHeader) != token || w.Header().Get(FailedAtHeader) != "" {
			t.Fatalf("answered %d %v", w.Code, w.Header())
		}
	}
	snap := stats(t, s)
	if snap.Service != "leaf" || snap.Replica != 3 || snap.Requests != 3 || snap.Answered["200"] != 3 {
		t.Fatalf("stats %+v", snap)
	}
	if snap.WorkSeconds.OK <= 0 || snap.WorkSeconds.Failed != 0 || snap.CPUSeconds.User+snap.CPUSeconds.System <= 0 {
		t.Fatalf("work %+v cpu %+v", snap.WorkSeconds, snap.CPUSeconds)
	}
}

func TestCallsGoToTheOutboundWithTheCalledServiceAsHost(t *testing.T) {
	d := newDownstream(t, ok)
	s := newService(t, chainConfig(d.server.Listener.Addr().String(),
		`[{"service": "recommendation", "times": 1}, {"service": "productcatalog", "times": 4, "parallel": true}]`))
	if w := serve(s, "GET", "/cart", nil, ""); w.Code != 200 {
		t.Fatalf("answered %d", w.Code)
	}
	got := strings.Join(d.hosts, ",")
	if d.hosts[0] != "recommendation GET /" || strings.Count(got, "productcatalog GET /") != 4 || len(d.hosts) != 5 {
		t.Fatalf("downstream saw %v", d.hosts)
	}
	snap := stats(t, s)
	if snap.Calls["recommendation"].Sent != 1 || snap.Calls["productcatalog"].Sent != 4 ||
		snap.Calls["productcatalog"].Statuses["200"] != 4 {
		t.Fatalf("calls %+v", snap.Calls)
	}
}

func TestASequentialStepStopsAtTheFirstFailureAndEndsTheRequest(t *testing.T) {
	d := newDownstream(t, func(n int64, w http.ResponseWriter) {
		if n == 2 {
			w.WriteHeader(503)
		}
	})
	s := newService(t, chainConfig(d.server.Listener.Addr().String(),
		`[{"service": "b", "times": 5}, {"service": "c", "times": 1}]`))
	w := serve(s, "GET", "/", nil, "")
	if w.Code != 500 || w.Header().Get(FailedAtHeader) != "b/status-503" || w.Header().Get(TargetHeader) != token {
		t.Fatalf("answered %d %v", w.Code, w.Header())
	}
	if d.count.Load() != 2 {
		t.Fatalf("downstream saw %d requests, want 2 (the second failed)", d.count.Load())
	}
	snap := stats(t, s)
	if snap.Answered["500"] != 1 || snap.Calls["c"].Sent != 0 || snap.Calls["b"].Statuses["503"] != 1 {
		t.Fatalf("stats %+v", snap)
	}
}

func TestAParallelStepWaitsForAllAndReportsTheFirstFailureInOrder(t *testing.T) {
	d := newDownstream(t, func(n int64, w http.ResponseWriter) {
		w.Header().Set(SidecarFlagsHeader, "UO")
		w.WriteHeader(503)
	})
	s := newService(t, chainConfig(d.server.Listener.Addr().String(),
		`[{"service": "b", "times": 6, "parallel": true}, {"service": "c", "times": 1}]`))
	w := serve(s, "GET", "/", nil, "")
	if w.Code != 500 || w.Header().Get(FailedAtHeader) != "b/UO" {
		t.Fatalf("answered %d %v", w.Code, w.Header())
	}
	if d.count.Load() != 6 {
		t.Fatalf("downstream saw %d requests, want 6", d.count.Load())
	}
	if flags := stats(t, s).Calls["b"].Flags; flags["UO"] != 6 {
		t.Fatalf("flags %v", flags)
	}
}

func TestADeeperFailureIsPassedUpUnchanged(t *testing.T) {
	d := newDownstream(t, func(n int64, w http.ResponseWriter) {
		w.Header().Set(FailedAtHeader, "db/UH")
		w.Header().Set(SidecarFlagsHeader, "-")
		w.WriteHeader(500)
	})
	s := newService(t, chainConfig(d.server.Listener.Addr().String(), `[{"service": "b", "times": 1}]`))
	if w := serve(s, "GET", "/", nil, ""); w.Code != 500 || w.Header().Get(FailedAtHeader) != "db/UH" {
		t.Fatalf("answered %d %v", w.Code, w.Header())
	}
}

func TestFlagsOnASuccessAreCountedButDoNotFail(t *testing.T) {
	d := newDownstream(t, func(n int64, w http.ResponseWriter) { w.Header().Set(SidecarFlagsHeader, "URX,UF") })
	s := newService(t, chainConfig(d.server.Listener.Addr().String(), `[{"service": "b", "times": 1}]`))
	if w := serve(s, "GET", "/", nil, ""); w.Code != 200 {
		t.Fatalf("answered %d", w.Code)
	}
	if flags := stats(t, s).Calls["b"].Flags; flags["URX"] != 1 || flags["UF"] != 1 || len(flags) != 2 {
		t.Fatalf("flags %v", flags)
	}
}

func TestATransportErrorIsStatusZero(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := closed.Addr().String()
	closed.Close()
	s := newService(t, chainConfig(address, `[{"service": "b", "times": 3}]`))
	if w := serve(s, "GET", "/", nil, ""); w.Code != 500 || w.Header().Get(FailedAtHeader) != "b/transport" {
		t.Fatalf("answered %d %v", w.Code, w.Header())
	}
	if c := stats(t, s).Calls["b"]; c.Sent != 1 || c.Statuses["0"] != 1 {
		t.Fatalf("calls %+v", c)
	}
}

func TestAnAbortAnswersAtOnceWithoutWorkOrCalls(t *testing.T) {
	d := newDownstream(t, ok)
	s := newService(t, `{"service": "mid", "work": {"kind": "factorial", "n": 3000}, "calls": [{"service": "b", "times": 1}],
		"outbound": "`+d.server.Listener.Addr().String()+`"}`)
	putFault(t, s, `{"abort": {"rate": 1, "status": 503}}`)
	w := serve(s, "GET", "/", nil, "")
	if w.Code != 503 || w.Header().Get(FailedAtHeader) != "mid/abort" || w.Header().Get(TargetHeader) != token {
		t.Fatalf("answered %d %v", w.Code, w.Header())
	}
	snap := stats(t, s)
	if d.count.Load() != 0 || snap.WorkSeconds.OK+snap.WorkSeconds.Failed != 0 || snap.Answered["503"] != 1 || snap.Requests != 1 {
		t.Fatalf("downstream saw %d, stats %+v", d.count.Load(), snap)
	}
	putFault(t, s, `{}`)
	if w := serve(s, "GET", "/", nil, ""); w.Code != 200 {
		t.Fatalf("after clearing: %d", w.Code)
	}
}

func TestWorkOnARequestThatFailsLaterIsCountedAsFailed(t *testing.T) {
	d := newDownstream(t, func(n int64, w http.ResponseWriter) { w.WriteHeader(503) })
	s := newService(t, `{"service": "mid", "work": {"kind": "sleep", "ms": 20}, "calls": [{"service": "b", "times": 1}],
		"outbound": "`+d.server.Listener.Addr().String()+`"}`)
	serve(s, "GET", "/", nil, "")
	if work := stats(t, s).WorkSeconds; work.OK != 0 || work.Failed < 0.02 {
		t.Fatalf("work %+v", work)
	}
}

func TestTheControlEndpoints(t *testing.T) {
	s := newService(t, `{"service": "leaf", "work": {"kind": "none"}}`)
	with := map[string]string{TargetHeader: token}
	cases := []struct {
		method, path string
		headers      map[string]string
		body         string
		status       int
		says         string
	}{
		{"GET", "/rbl/stats", nil, "", 403, "token"},
		{"GET", "/rbl/stats", map[string]string{TargetHeader: "other"}, "", 403, "token"},
		{"PUT", "/rbl/fault", nil, `{}`, 403, "token"},
		{"PUT", "/rbl/fault", with, `{"abort": {"rate": 2, "status": 503}}`, 400, "abort.rate must be from 0 to 1\n"},
		{"PUT", "/rbl/fault", with, `not json`, 400, "not a fault"},
		{"PUT", "/rbl/fault", with, `{"delay": {"rate": 0.5, "ms": 7}}`, 200, `{"delay":{"rate":0.5,"ms":7}}`},
		{"GET", "/rbl/fault", with, "", 200, `{"delay":{"rate":0.5,"ms":7}}`},
		{"POST", "/rbl/fault", with, "", 405, "GET or PUT"},
		{"PUT", "/rbl/stats", with, "", 405, "GET"},
		{"GET", "/rbl/other", with, "", 404, "no such control endpoint"},
	}
	for _, tc := range cases {
		w := serve(s, tc.method, tc.path, tc.headers, tc.body)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.says) || w.Header().Get(TargetHeader) != token {
			t.Errorf("%s %s %v: %d %q", tc.method, tc.path, tc.headers, w.Code, w.Body)
		}
	}
	if snap := stats(t, s); snap.Requests != 0 {
		t.Fatalf("control requests counted as requests: %+v", snap)
	}
}
