package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

const requestTimeout = 60 * time.Second

// Target is one virtual user's keep-alive connection to the target; it records every request it sends.
type Target struct {
	job       *Job
	ctx       context.Context // ends at the job's deadline or when its caller leaves
	started   time.Time
	client    *http.Client
	transport *http.Transport
	owned     bool          // its own transport (a /run's), closed with the job; a /call's is the service's pool
	request   *http.Request // each request is a copy of it, with the call's context
	logged    func() int    // requests of the calls already logged

	mu   sync.Mutex
	sent [][3]int64 // the call in progress
}

// userTransport is a virtual user's own keep-alive connection to the target.
func userTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        1,
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

// callTransport is the pool of keep-alive connections to the target that /calls share, one call at
// a time each, as a production client's: a connection per /call overflowed the target's listen queue
// at hundreds of calls a second (a dropped SYN costs its request a second).
func callTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        MaxJobs,
		MaxIdleConnsPerHost: MaxJobs,
		IdleConnTimeout:     10 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

// newTarget builds the job's request once: a target_url Go's URL parser refuses is the job's error
// (a 400), not a request that cannot be sent. A nil pool gives the job a connection of its own.
func newTarget(ctx context.Context, job *Job, started time.Time, logged func() int, pool *http.Transport) (*Target, error) {
	request, err := http.NewRequest(http.MethodGet, "http://"+job.Host+":"+strconv.Itoa(job.Port)+job.Path, nil)
	if err != nil {
		return nil, jobError("`target_url` cannot be requested: %s", clip(err.Error(), 120))
	}
	transport, owned := pool, false
	if transport == nil {
		transport, owned = userTransport(), true
	}
	return &Target{job: job, ctx: ctx, started: started, transport: transport, owned: owned,
		client: &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
		request: request,
		logged:  logged}, nil
}

// Sent is the number of requests sent so far, by logged calls and the call in progress.
func (t *Target) Sent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.logged() + len(t.sent)
}

func (t *Target) takeCall() [][3]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	call := t.sent
	t.sent = nil
	return call
}

// cause is why the job's context ended, as a CutShort.
func cause(ctx context.Context) error {
	var cut *CutShort
	if errors.As(context.Cause(ctx), &cut) {
		return cut
	}
	return errMaxDuration
}

// Send sends one request: nil on 2xx, a RequestFailed otherwise, a CutShort when a limit ends the call.
func (t *Target) Send() error {
	if t.ctx.Err() != nil {
		return cause(t.ctx)
	}
	if t.Sent() >= t.job.MaxRequests {
		return &CutShort{"max_requests"}
	}
	ctx, cancel := context.WithTimeout(t.ctx, requestTimeout)
	defer cancel()
	request := t.request.Clone(ctx)
	began := time.Now()
	status := 0
	response, err := t.client.Do(request)
	if err == nil {
		_, err = io.Copy(io.Discard, response.Body)
		response.Body.Close()
		if err == nil {
			status = response.StatusCode
		}
	}
	ended := time.Now()
	t.mu.Lock()
	t.sent = append(t.sent, [3]int64{began.Sub(t.started).Microseconds(), ended.Sub(began).Microseconds(), int64(status)})
	t.mu.Unlock()
	if status == 0 && t.ctx.Err() != nil {
		return cause(t.ctx)
	}
	if status < 200 || status > 299 {
		return &RequestFailed{status}
	}
	return nil
}

func (t *Target) Close() {
	if t.owned {
		t.transport.CloseIdleConnections()
	}
}
