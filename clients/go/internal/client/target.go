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
	sent []*[3]int64 // the call in progress, in the order its requests started (a hedge's overlap)
}

// userTransport is a virtual user's own keep-alive connection to the target. A hedge's request,
// sent while another of its call is in flight, gets a connection of its own (no MaxConnsPerHost: it
// would wait for the first one); one is kept idle, the others are closed once done.
func userTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        1,
		MaxIdleConnsPerHost: 1,
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

func (t *Target) takeCall() [][3]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sent == nil {
		return nil
	}
	call := make([][3]int64, len(t.sent))
	for i, request := range t.sent {
		call[i] = *request
	}
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

// Send sends one request with the attempt's context (the job's, or a child a pattern cancels): nil
// on 2xx, a RequestFailed otherwise, a CutShort when a limit ends the call, errInterrupted when a
// pattern cancelled the attempt (its request, if it was in flight, is logged with status 0 and its
// duration up to the cancel). Concurrent Sends of one call (hedges) are safe.
func (t *Target) Send(ctx context.Context) error {
	if t.ctx.Err() != nil {
		return cause(t.ctx)
	}
	if ctx.Err() != nil {
		return errInterrupted // cancelled before it could send: no request
	}
	t.mu.Lock()
	if t.logged()+len(t.sent) >= t.job.MaxRequests {
		t.mu.Unlock()
		return &CutShort{"max_requests"}
	}
	began := time.Now()
	record := &[3]int64{began.Sub(t.started).Microseconds(), 0, 0}
	t.sent = append(t.sent, record)
	t.mu.Unlock()
	bounded, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	request := t.request.Clone(bounded)
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
	record[1], record[2] = ended.Sub(began).Microseconds(), int64(status)
	t.mu.Unlock()
	if status == 0 && t.ctx.Err() != nil {
		return cause(t.ctx)
	}
	if status == 0 && ctx.Err() != nil {
		return errInterrupted
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
