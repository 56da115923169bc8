package service

// Step 3 of a request: the downstream calls, through this service's sidecar (its outbound
// listener), which routes by the Host header as Istio's does; and where a failure started.

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"rbl.dev/chain/internal/config"
)

// The headers of the failure rule.
const (
	FailedAtHeader     = "X-Rbl-Failed-At"      // <service>/<cause>, where a failed request's failure started
	SidecarFlagsHeader = "X-Rbl-Response-Flags" // Envoy's response flags on the sidecar's replies ("-" for none)
)

// FailedAt says where the failure of a call to called started: deeper when the failed answer says
// so (passed up unchanged), else at this call, its cause the sidecar's response flags when it set
// any, else the status, or "transport" when there was no answer (status 0).
func FailedAt(called string, status int, downstream, flags string) string {
	switch {
	case downstream != "":
		return downstream
	case status == 0:
		return called + "/transport"
	case flags != "" && flags != "-":
		return called + "/" + flags
	default:
		return called + "/status-" + strconv.Itoa(status)
	}
}

// noHeaders is every call's request header map: nothing to add, and the transport only reads it.
var noHeaders = http.Header{}

// step is one entry of the configuration's calls, ready to send.
type step struct {
	service  string
	times    int
	parallel bool
	stats    *callStats
}

// caller sends the calls: one keep-alive transport, never through a proxy from the environment.
type caller struct {
	transport *http.Transport
	url       *url.URL // http://OUTBOUND/, shared read-only by every call
	steps     []step
}

func newCaller(c config.Config, stats *Stats) *caller {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy:               nil,
		DialContext:         dialer.DialContext,
		MaxIdleConns:        0, // no limit over all hosts: there is one, the sidecar
		MaxIdleConnsPerHost: 4096,
		MaxConnsPerHost:     4096,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	steps := make([]step, len(c.Calls))
	for i, call := range c.Calls {
		steps[i] = step{service: call.Service, times: call.Times, parallel: call.Parallel, stats: stats.calls[call.Service]}
	}
	return &caller{transport: transport, url: &url.URL{Scheme: "http", Host: c.Outbound, Path: "/"}, steps: steps}
}

// run makes the calls, step after step; the first failed step ends them. It returns where the
// failure started, or "" when every call answered 2xx.
func (c *caller) run(ctx context.Context) string {
	for i := range c.steps {
		s := &c.steps[i]
		if s.parallel && s.times > 1 {
			if failed := c.parallel(ctx, s); failed != "" {
				return failed
			}
			continue
		}
		for range s.times {
			if failed := c.call(ctx, s); failed != "" {
				return failed // one after another: stop at the first failure
			}
		}
	}
	return ""
}

// parallel makes a step's calls at once and waits for all; the failure reported is that of the
// first failed call in the step's order, so the same failures give the same answer.
func (c *caller) parallel(ctx context.Context, s *step) string {
	results := make([]string, s.times)
	var wg sync.WaitGroup
	wg.Add(s.times - 1)
	for i := 1; i < s.times; i++ {
		go func() {
			defer wg.Done()
			results[i] = c.call(ctx, s)
		}()
	}
	results[0] = c.call(ctx, s) // on this goroutine: one fewer to start
	wg.Wait()
	for _, failed := range results {
		if failed != "" {
			return failed
		}
	}
	return ""
}

// call sends one GET / to the called service and reads its answer to the end (so the connection
// goes back to the pool); it returns where a failure started, or "".
func (c *caller) call(ctx context.Context, s *step) string {
	request := (&http.Request{Method: http.MethodGet, URL: c.url, Host: s.service, Header: noHeaders,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}).WithContext(ctx)
	s.stats.sent.Add(1)
	s.stats.inFlight.enter()
	defer s.stats.inFlight.leave()
	began := time.Now()
	response, err := c.transport.RoundTrip(request)
	if err != nil {
		s.stats.statuses.add(0)
		return FailedAt(s.service, 0, "", "")
	}
	_, _ = io.Copy(io.Discard, response.Body)
	response.Body.Close()
	s.stats.statuses.add(response.StatusCode)
	flags := first(response.Header[SidecarFlagsHeader])
	if flags != "" && flags != "-" {
		s.stats.addFlags(flags)
	}
	if response.StatusCode >= 200 && response.StatusCode < 300 {
		s.stats.succeeded.add(time.Since(began)) // the response time of the call's successes
		return ""
	}
	return FailedAt(s.service, response.StatusCode, first(response.Header[FailedAtHeader]), flags)
}

func first(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return values[0]
}
