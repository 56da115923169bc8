package client

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/failsafe-go/failsafe-go"
)

// A pattern turns "send one request" into "one call through the library". The result is the
// library's (a fallback's value, say); ctx is the attempt's: cancelling it stops its request.
type Operation func(ctx context.Context) (any, error)

// Wrapper wraps the next operation inward.
type Wrapper func(next Operation) Operation

// Instance is a built pattern instance: a Wrapper of its own (gobreaker, backoff), or a failsafe-go
// policy, run with its neighbouring policies as one failsafe.With(outer, ..., inner) execution, as an
// application composes them; neither for baseline.
type Instance struct {
	Wrap   Wrapper
	Policy failsafe.Policy[any]
	Hedges bool // the policy runs attempts of one call at once (a HedgePolicy)
	// Limit reads a concurrency limit the policy moves itself (an adaptive limiter): the limit now
	// and the executions in flight. nil for every other pattern.
	Limit func() (limit int, inflight int)
}

// Builder builds a pattern instance from library-native parameters (a JobError when they are wrong).
type Builder func(params map[string]any) (*Instance, error)

// compose wraps send in the instances, outermost first; consecutive failsafe-go policies (with any
// baseline among them) become one failsafe.With(...).
func compose(instances []*Instance, send Operation) Operation {
	call := send
	for i := len(instances) - 1; i >= 0; {
		if instances[i].Policy == nil {
			if instances[i].Wrap != nil {
				call = instances[i].Wrap(call)
			}
			i--
			continue
		}
		var policies []failsafe.Policy[any]
		hedged := false
		for ; i >= 0 && instances[i].Wrap == nil; i-- {
			if instances[i].Policy != nil {
				policies = append([]failsafe.Policy[any]{instances[i].Policy}, policies...)
				hedged = hedged || instances[i].Hedges
			}
		}
		call = failsafeCall(policies, hedged, call)
	}
	return call
}

// Service runs jobs for one library.
type Service struct {
	Library  string
	Version  string
	Patterns map[string]Builder
	order    []string
	Host     string
	Port     int

	mu     sync.Mutex
	shared map[string]*list.Element
	lru    *list.List
	calls  *http.Transport // the /calls' pool of connections to the target
}

type sharedEntry struct {
	key      string
	instance *Instance
	job      string // the jobs' instance name (their "instance")
	pattern  string
}

func NewService(library string, host string, port int) (*Service, error) {
	lib, ok := Libraries[library]
	if !ok {
		return nil, errors.New("unknown library " + library)
	}
	return &Service{Library: library, Version: moduleVersion(lib.module), Patterns: lib.patterns, order: lib.order,
		Host: host, Port: port, shared: map[string]*list.Element{}, lru: list.New(), calls: callTransport()}, nil
}

func (s *Service) Health() map[string]any {
	return map[string]any{"protocol": ProtocolVersion, "library": s.Library, "version": s.Version, "patterns": s.order,
		"endpoints": jobRoutes}
}

// Limits reads the limit of every shared instance whose limit adapts (GET /limits): a runner records
// it over time, as it records the limits its own controllers set.
func (s *Service) Limits() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	limits := []map[string]any{}
	for element := s.lru.Front(); element != nil; element = element.Next() {
		entry := element.Value.(*sharedEntry)
		if entry.instance.Limit != nil {
			limit, inflight := entry.instance.Limit()
			limits = append(limits, map[string]any{"instance": entry.job, "pattern": entry.pattern, "limit": limit,
				"inflight": inflight})
		}
	}
	return map[string]any{"protocol": ProtocolVersion, "library": s.Library, "limits": limits}
}

func (s *Service) instance(job *Job, position int) (*Instance, error) {
	step := job.Strategy[position]
	build, ok := s.Patterns[step.Pattern]
	if !ok {
		return nil, jobError("%s has no pattern %s; it has %v", s.Library, shown(clip(step.Pattern, 40)), s.order)
	}
	if job.Share == "user" {
		return build(step.Params)
	}
	// share: client: one instance per key across virtual users, as production code shares a breaker
	params, _ := json.Marshal(step.Params) // maps marshal with sorted keys
	key := job.Instance + "\x00" + string(rune('0'+position)) + "\x00" + step.Pattern + "\x00" + string(params)
	s.mu.Lock()
	defer s.mu.Unlock()
	if element, ok := s.shared[key]; ok {
		s.lru.MoveToFront(element)
		return element.Value.(*sharedEntry).instance, nil
	}
	instance, err := build(step.Params)
	if err != nil {
		return nil, err
	}
	s.shared[key] = s.lru.PushFront(&sharedEntry{key, instance, job.Instance, step.Pattern})
	if s.lru.Len() > sharedInstancesKept {
		oldest := s.lru.Back()
		s.lru.Remove(oldest)
		delete(s.shared, oldest.Value.(*sharedEntry).key)
	}
	return instance, nil
}

// Run runs one job; gone is closed when its caller leaves. A JobError when its strategy is wrong.
// maxCalls 0 is a /run job (the paper's loop); 1 is a /call: the same loop, ended after one call.
func (s *Service) Run(job *Job, gone <-chan struct{}, maxCalls int) (map[string]any, error) {
	// the job starts before its instances are built: a rate limiter's periods count from its creation,
	// so they must not begin before the job's clock does (start_us 0)
	started := time.Now()
	instances := make([]*Instance, len(job.Strategy))
	for i := range job.Strategy {
		instance, err := s.instance(job, i)
		if err != nil {
			return nil, err
		}
		instances[i] = instance
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	deadline := time.AfterFunc(time.Until(started.Add(time.Duration(job.MaxDurationMs)*time.Millisecond)),
		func() { cancel(errMaxDuration) })
	defer deadline.Stop()
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		select {
		case <-gone:
			cancel(errDisconnected)
		case <-stopWatch:
		}
	}()
	log := &CallLog{}
	var pool *http.Transport
	if maxCalls == 1 {
		pool = s.calls
	}
	target, err := newTarget(ctx, job, started, func() int { return log.Requests }, pool)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	call := compose(instances, func(ctx context.Context) (any, error) { return nil, target.Send(ctx) })
	stoppedBy := loop(ctx, job, call, target, log, maxCalls)
	if maxCalls == 1 && len(log.Calls) == 0 { // the deadline or the caller went before the call began
		log.Add(false, nil, true, Ending{})
	}
	return map[string]any{"protocol": ProtocolVersion, "library": s.Library, "version": s.Version, "vu": job.VU,
		"total_us": time.Since(started).Microseconds(), "stopped_by": stoppedBy, "calls": log.Calls}, nil
}

// loop is the paper's loop: the limits are checked before each call, and inside it by the target and the context.
func loop(ctx context.Context, job *Job, call Operation, target *Target, log *CallLog, maxCalls int) string {
	for made := 0; ; made++ {
		switch {
		case made == maxCalls && maxCalls > 0:
			return oneCallStop
		case log.SuccessfulCalls >= job.Successes:
			return "successes"
		case log.Requests >= job.MaxRequests:
			return "max_requests"
		case ctx.Err() != nil:
			return cause(ctx).(*CutShort).Reason
		}
		began := time.Now()
		result, err := call(ctx)
		requests := target.takeCall()
		var cut *CutShort
		if errors.As(err, &cut) || (err != nil && ctx.Err() != nil) {
			if cut == nil {
				cut = cause(ctx).(*CutShort)
			}
			log.Add(false, requests, true, Ending{})
			return cut.Reason
		}
		ok, ending := endingOf(result, err, began)
		log.Add(ok, requests, false, ending)
		if len(requests) == 0 {
			runtime.Gosched() // a call rejected without a request (open breaker) takes microseconds
		}
	}
}
