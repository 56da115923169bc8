package client

// Resilience patterns built from the real libraries. Parameters arrive library-native, named as
// the library names them and in the catalogue's units (rbl/libraries/prelude.rbl: durations in
// milliseconds), exactly as the plan holds them. A parameter the library does not have is a 400.

import (
	"context"
	"errors"
	"math"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/fallback"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/sony/gobreaker/v2"
)

type library struct {
	module   string
	patterns map[string]Builder
	order    []string
}

// Libraries is what this service can run: --library NAME.
var Libraries = map[string]library{
	"failsafe": {"github.com/failsafe-go/failsafe-go",
		map[string]Builder{"baseline": baseline, "retry": failsafeRetry, "circuit_breaker": failsafeBreaker,
			"timeout": failsafeTimeout, "bulkhead": failsafeBulkhead, "adaptive_limiter": failsafeAdaptiveLimiter,
			"adaptive_throttler": failsafeAdaptiveThrottler, "rate_limiter": failsafeRateLimiter, "hedge": failsafeHedge,
			"fallback": failsafeFallback},
		[]string{"baseline", "retry", "circuit_breaker", "timeout", "bulkhead", "adaptive_limiter", "adaptive_throttler",
			"rate_limiter", "hedge", "fallback"}},
	"gobreaker": {"github.com/sony/gobreaker/v2",
		map[string]Builder{"baseline": baseline, "circuit_breaker": gobreakerBreaker},
		[]string{"baseline", "circuit_breaker"}},
	"backoff": {"github.com/cenkalti/backoff/v5",
		map[string]Builder{"baseline": baseline, "retry": backoffRetry},
		[]string{"baseline", "retry"}},
}

func moduleVersion(module string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == module {
				return dep.Version
			}
		}
	}
	return "unknown"
}

func baseline(values map[string]any) (*Instance, error) {
	if p := readParams(values); p.err != nil {
		return nil, p.err
	}
	return &Instance{}, nil // no wrapper, no policy: the call as it is
}

// Refusal is a failure a library policy produced by refusing the call (an open breaker, a full
// bulkhead, an exceeded rate limit); At is when the call ended with it.
type Refusal struct {
	Kind string
	At   time.Time
	Err  error
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

func refusalKind(err error) string {
	switch {
	case errors.Is(err, circuitbreaker.ErrOpen), errors.Is(err, gobreaker.ErrOpenState),
		errors.Is(err, gobreaker.ErrTooManyRequests):
		return "circuit_breaker"
	case errors.Is(err, bulkhead.ErrFull), errors.Is(err, adaptivelimiter.ErrExceeded):
		return "bulkhead" // an adaptive limiter's refusal is a concurrency limit's, as a bulkhead's
	case errors.Is(err, ratelimiter.ErrExceeded), errors.Is(err, adaptivethrottler.ErrExceeded):
		return "rate_limiter" // a throttler's refusal sheds load by rate, as a rate limiter's
	}
	return ""
}

// refused marks a refusal with the time the library returned it: when failsafe.With(...).Get or
// gobreaker's Execute returns it. No failsafe-go policy waits after a refusal it passes on (a
// RetryPolicy returns its last failure at once, a HedgePolicy its first result), so that is the time
// of the refusal. A refusal already marked keeps its mark.
func refused(err error) error {
	var r *Refusal
	if err == nil || errors.As(err, &r) {
		return err
	}
	if kind := refusalKind(err); kind != "" {
		return &Refusal{kind, time.Now(), err}
	}
	return err
}

// endingOf is how the library ended a call that was not cut short (the protocol's "rejected",
// "timed_out", "fallback"), and whether the target succeeded.
func endingOf(result any, err error, began time.Time) (bool, Ending) {
	var r *Refusal
	switch {
	case err == nil && result == fallbackValue:
		return false, Ending{Fallback: true}
	case err == nil:
		return true, Ending{}
	case errors.As(err, &r):
		return false, Ending{Rejected: r.Kind, WaitUs: max(r.At.Sub(began).Microseconds(), 0)}
	case errors.Is(err, timeout.ErrExceeded):
		return false, Ending{TimedOut: true}
	}
	return false, Ending{}
}

// -- failsafe-go: consecutive policies of a strategy run as one failsafe.With(outer, ..., inner) -----

// failsafeCall runs next through the policies, outermost first, as one failsafe-go execution:
// failsafe.With(policies...).WithContext(ctx).GetWithExecution(fn), fn sending through next with the
// execution's context (an attempt's own, under a Timeout or a HedgePolicy: cancelling it stops the
// request). A HedgePolicy returns with its cancelled attempts still running; hedged waits for them
// to return (they were cancelled: microseconds), so that every request of the call is in its log.
func failsafeCall(policies []failsafe.Policy[any], hedged bool, next Operation) Operation {
	return func(ctx context.Context) (any, error) {
		var running *attempts
		if hedged {
			running = newAttempts()
		}
		result, err := failsafe.With(policies...).WithContext(ctx).GetWithExecution(func(exec failsafe.Execution[any]) (any, error) {
			if running != nil {
				if !running.enter() { // a hedge whose goroutine began after the call ended: it was cancelled
					return nil, errInterrupted
				}
				defer running.leave()
			}
			return next(exec.Context())
		})
		if running != nil {
			running.closeAndWait()
		}
		return result, refused(err)
	}
}

// attempts counts a call's attempts in progress (a HedgePolicy runs them in goroutines of its own).
type attempts struct {
	mu     sync.Mutex
	idle   *sync.Cond
	n      int
	closed bool
}

func newAttempts() *attempts {
	a := &attempts{}
	a.idle = sync.NewCond(&a.mu)
	return a
}

func (a *attempts) enter() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.n++
	return true
}

func (a *attempts) leave() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n--; a.n == 0 {
		a.idle.Broadcast()
	}
}

func (a *attempts) closeAndWait() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	for a.n > 0 {
		a.idle.Wait()
	}
}

func failsafeRetry(values map[string]any) (*Instance, error) {
	p := readParams(values, "maxAttempts", "delay", "maxDelay", "delayFactor", "delayMin", "delayMax", "jitter",
		"jitterFactor", "maxDuration", "budgetMaxRate", "budgetMinConcurrency")
	builder := retrypolicy.NewBuilder[any]().
		HandleIf(handled). // any failure (a refusal, a timeout) but a cut-short call
		ReturnLastFailure().
		WithMaxAttempts(int(p.integer("maxAttempts", 1, maxInt, 3)))
	delay := p.duration("delay", 0)
	switch {
	case p.has("delayMin") || p.has("delayMax"):
		low, high := p.duration("delayMin", 0), p.duration("delayMax", 0)
		if low <= 0 || high < low {
			p.fail("`delayMin` and `delayMax` must both be given, with 0 < delayMin <= delayMax")
		}
		if p.has("maxDelay") {
			p.fail("`maxDelay` (a backoff) and `delayMin`/`delayMax` (a random delay) exclude each other")
		}
		p.number("delayFactor", math.SmallestNonzeroFloat64, maxFactor, 2) // checked, though only a backoff uses it
		builder.WithRandomDelay(low, high)
	case p.has("maxDelay"):
		maxDelay := p.duration("maxDelay", 0)
		if delay <= 0 || maxDelay < delay {
			p.fail("a backoff needs 0 < delay <= maxDelay")
		}
		builder.WithBackoffFactor(delay, maxDelay, p.number("delayFactor", math.SmallestNonzeroFloat64, maxFactor, 2))
	default: // delayFactor only applies with maxDelay (WithBackoffFactor); a plan always carries its default
		p.number("delayFactor", math.SmallestNonzeroFloat64, maxFactor, 2)
		builder.WithDelay(delay)
	}
	if p.has("jitter") {
		builder.WithJitter(p.duration("jitter", 0))
	}
	if p.has("jitterFactor") {
		if p.has("jitter") {
			p.fail("give `jitter` or `jitterFactor`, not both")
		}
		builder.WithJitterFactor(p.number("jitterFactor", 0, 1, 0))
	}
	builder.WithMaxDuration(p.duration("maxDuration", 0))
	if p.has("budgetMaxRate") || p.has("budgetMinConcurrency") {
		// one budget per instance: shared by the calls that share the instance (share = client)
		builder.WithBudget(budget.NewBuilder().
			WithMaxRate(p.number("budgetMaxRate", 0, 100, 20) / 100).
			WithMinConcurrency(uint(p.integer("budgetMinConcurrency", 0, maxInt, 3))).
			Build())
	}
	if p.err != nil {
		return nil, p.err
	}
	return &Instance{Policy: builder.Build()}, nil
}

func failsafeBreaker(values map[string]any) (*Instance, error) {
	p := readParams(values, "failureThreshold", "failureThresholdingCapacity", "failureThresholdingPeriod",
		"failureRateThreshold", "failureExecutionThreshold", "delay", "successThreshold", "successThresholdingCapacity")
	builder := circuitbreaker.NewBuilder[any]().
		HandleIf(handled).
		WithDelay(p.duration("delay", time.Minute))
	threshold := uint(p.integer("failureThreshold", 1, maxWindow, 1))
	period := p.duration("failureThresholdingPeriod", 0)
	if p.has("failureThresholdingPeriod") && period < time.Millisecond {
		// failsafe-go splits the period into 10 buckets and divides the clock by a bucket's length:
		// under 10 ns that length is 0 and the first call panics
		p.fail("`failureThresholdingPeriod` must be at least 1 ms, got %s", period)
	}
	// a parameter the chosen thresholding ignores is refused, not dropped silently
	if p.has("failureExecutionThreshold") && !p.has("failureRateThreshold") {
		p.fail("`failureExecutionThreshold` applies only with `failureRateThreshold`")
	}
	if p.has("failureThresholdingCapacity") && p.has("failureThresholdingPeriod") {
		p.fail("give `failureThresholdingCapacity` (count-based) or `failureThresholdingPeriod` (time-based), not both")
	}
	if p.has("successThresholdingCapacity") && !p.has("successThreshold") {
		p.fail("`successThresholdingCapacity` applies only with `successThreshold`")
	}
	switch {
	case p.has("failureRateThreshold"):
		rate := p.number("failureRateThreshold", 0, 100, 0) / 100
		executions := uint(p.integer("failureExecutionThreshold", 1, maxInt, 1))
		if period <= 0 {
			p.fail("`failureRateThreshold` needs `failureThresholdingPeriod` (WithFailureRateThreshold(rate, executions, period))")
		}
		builder.WithFailureRateThreshold(rate, executions, period)
	case period > 0:
		builder.WithFailureThresholdPeriod(threshold, period)
	default:
		capacity := uint(p.integer("failureThresholdingCapacity", 1, maxWindow, int64(threshold)))
		if capacity < threshold {
			p.fail("`failureThresholdingCapacity` must be at least `failureThreshold`")
		}
		builder.WithFailureThresholdRatio(threshold, capacity)
	}
	if p.has("successThreshold") {
		successes := uint(p.integer("successThreshold", 1, maxWindow, 1))
		capacity := uint(p.integer("successThresholdingCapacity", 1, maxWindow, int64(successes)))
		if capacity < successes {
			p.fail("`successThresholdingCapacity` must be at least `successThreshold`")
		}
		builder.WithSuccessThresholdRatio(successes, capacity)
	}
	if p.err != nil {
		return nil, p.err
	}
	return &Instance{Policy: builder.Build()}, nil
}

// timeout.NewBuilder(timeout): the execution inside it gets a child context, cancelled when the time
// limit passes; the policy waits for the execution to return and fails with ErrExceeded.
func failsafeTimeout(values map[string]any) (*Instance, error) {
	p := readParams(values, "timeout")
	p.require("timeout")
	limit := p.duration("timeout", 0)
	if limit <= 0 {
		p.fail("`timeout` must be above 0 ms")
	}
	if p.err != nil {
		return nil, p.err
	}
	return &Instance{Policy: timeout.NewBuilder[any](limit).Build()}, nil
}

// bulkhead.NewBuilder(maxConcurrency).WithMaxWaitTime(maxWaitTime): ErrFull beyond it.
func failsafeBulkhead(values map[string]any) (*Instance, error) {
	p := readParams(values, "maxConcurrency", "maxWaitTime")
	p.require("maxConcurrency")
	concurrency := p.integer("maxConcurrency", 1, maxInt, 1)
	wait := p.duration("maxWaitTime", 0)
	if p.err != nil {
		return nil, p.err
	}
	return &Instance{Policy: bulkhead.NewBuilder[any](uint(concurrency)).WithMaxWaitTime(wait).Build()}, nil
}

// adaptivelimiter.NewBuilder(): WithLimits, WithMaxLimitFactor, WithRecentWindow, WithRecentQuantile,
// WithBaselineWindow, WithCorrelationWindow, and WithQueueing with WithMaxWaitTime when both rejection
// factors are given. The builder panics on what it refuses; every such value is a 400 here first.
func failsafeAdaptiveLimiter(values map[string]any) (*Instance, error) {
	p := readParams(values, "minLimit", "maxLimit", "initialLimit", "maxLimitFactor", "recentWindowMin",
		"recentWindowMax", "recentWindowMinSamples", "recentQuantile", "baselineWindowAge", "correlationWindowSize",
		"initialRejectionFactor", "maxRejectionFactor", "maxWaitTime")
	minLimit := p.integer("minLimit", 1, maxWindow, 1)
	maxLimit := p.integer("maxLimit", 1, maxWindow, 200)
	initialLimit := p.integer("initialLimit", 1, maxWindow, 20)
	factor := p.number("maxLimitFactor", 1, maxFactor, 5)
	recentMin := p.duration("recentWindowMin", time.Second)
	recentMax := p.duration("recentWindowMax", 30*time.Second)
	samples := p.integer("recentWindowMinSamples", 1, maxWindow, 50)
	quantile := p.number("recentQuantile", 0, 1, 0.9)
	age := p.integer("baselineWindowAge", 1, maxWindow, 10)
	correlation := p.integer("correlationWindowSize", 1, maxWindow, 50)
	initialRejection := p.number("initialRejectionFactor", 1, maxFactor, 0)
	maxRejection := p.number("maxRejectionFactor", 1, maxFactor, 0)
	wait := p.duration("maxWaitTime", 0)
	switch {
	case quantile <= 0 || quantile >= 1:
		p.fail("`recentQuantile` must be above 0 and below 1")
	case !(minLimit <= initialLimit && initialLimit <= maxLimit):
		p.fail("`initialLimit` must be between `minLimit` and `maxLimit`")
	case recentMin > recentMax:
		p.fail("`recentWindowMax` must be at least `recentWindowMin`")
	case p.has("initialRejectionFactor") != p.has("maxRejectionFactor"):
		p.fail("`initialRejectionFactor` and `maxRejectionFactor` go together")
	case initialRejection > maxRejection:
		p.fail("`initialRejectionFactor` must be at most `maxRejectionFactor`")
	}
	if p.err != nil {
		return nil, p.err
	}
	builder := adaptivelimiter.NewBuilder[any]().
		WithLimits(uint(minLimit), uint(maxLimit), uint(initialLimit)).
		WithMaxLimitFactor(factor).
		WithRecentWindow(recentMin, recentMax, uint(samples)).
		WithRecentQuantile(quantile).
		WithBaselineWindow(uint(age)).
		WithCorrelationWindow(uint(correlation))
	if p.has("initialRejectionFactor") {
		builder = builder.WithQueueing(initialRejection, maxRejection).WithMaxWaitTime(wait)
	}
	limiter := builder.Build()
	return &Instance{Policy: limiter, Limit: func() (int, int) { return limiter.Limit(), limiter.Inflight() }}, nil
}

// adaptivethrottler.NewBuilder(): HandleIf(handled), WithFailureRateThreshold(rate, executionThreshold,
// thresholdingPeriod), WithMaxRejectionRate: Google SRE client-side throttling, ErrExceeded when a
// call is drawn for rejection.
func failsafeAdaptiveThrottler(values map[string]any) (*Instance, error) {
	p := readParams(values, "failureRateThreshold", "executionThreshold", "thresholdingPeriod", "maxRejectionRate")
	rate := p.number("failureRateThreshold", 0, 100, 10) / 100
	executions := p.integer("executionThreshold", 0, maxInt, 0)
	period := p.duration("thresholdingPeriod", time.Minute)
	rejection := p.number("maxRejectionRate", 0, 100, 90) / 100
	if period < time.Millisecond {
		// the period is split into 20 buckets, and the clock divided by a bucket's length
		p.fail("`thresholdingPeriod` must be at least 1 ms, got %s", period)
	}
	if p.err != nil {
		return nil, p.err
	}
	return &Instance{Policy: adaptivethrottler.NewBuilder[any]().
		HandleIf(handled).
		WithFailureRateThreshold(rate, uint(executions), period).
		WithMaxRejectionRate(rejection).
		Build()}, nil
}

// ratelimiter.NewSmoothBuilder / NewBurstyBuilder(maxExecutions, period).WithMaxWaitTime(maxWaitTime):
// ErrExceeded when no permit comes within maxWaitTime.
func failsafeRateLimiter(values map[string]any) (*Instance, error) {
	p := readParams(values, "limiter", "maxExecutions", "period", "maxWaitTime")
	p.require("maxExecutions", "period")
	kind := p.choice("limiter", "SMOOTH", "SMOOTH", "BURSTY")
	executions := p.integer("maxExecutions", 1, maxInt, 1)
	period := p.duration("period", 0)
	wait := p.duration("maxWaitTime", 0)
	if period <= 0 {
		p.fail("`period` must be above 0 ms")
	} else if kind == "SMOOTH" && period/time.Duration(executions) <= 0 {
		// NewSmoothBuilder's interval, period / maxExecutions, would be 0: the library would build a
		// bursty limiter without a period, which divides by zero
		p.fail("a SMOOTH limiter needs `period` / `maxExecutions` of at least 1 ns")
	}
	if p.err != nil {
		return nil, p.err
	}
	var builder ratelimiter.Builder[any]
	if kind == "SMOOTH" {
		builder = ratelimiter.NewSmoothBuilder[any](uint(executions), period)
	} else {
		builder = ratelimiter.NewBurstyBuilder[any](uint(executions), period)
	}
	return &Instance{Policy: builder.WithMaxWaitTime(wait).Build()}, nil
}

// hedgepolicy.NewBuilderWithDelay(delay).WithMaxHedges(maxHedges), nothing else: by default the
// first attempt to return anything (a success or a failure) wins and the others are cancelled.
func failsafeHedge(values map[string]any) (*Instance, error) {
	p := readParams(values, "delay", "maxHedges")
	p.require("delay")
	delay := p.duration("delay", 0)
	// the policy allocates room for every hedge up front: no more than a job's requests
	hedges := p.integer("maxHedges", 1, MaxCount, 1)
	if p.err != nil {
		return nil, p.err
	}
	return &Instance{Policy: hedgepolicy.NewBuilderWithDelay[any](delay).WithMaxHedges(int(hedges)).Build(), Hedges: true}, nil
}

// fallbackValue is the result a fallback returns: the call is reported as a fallback, not a success.
var fallbackValue any = &struct{ name string }{"fallback"}

// fallback.NewBuilderWithResult(value): a failed execution returns the value instead (not a cut-short one).
func failsafeFallback(values map[string]any) (*Instance, error) {
	if p := readParams(values); p.err != nil {
		return nil, p.err
	}
	return &Instance{Policy: fallback.NewBuilderWithResult[any](fallbackValue).HandleIf(handled).Build()}, nil
}

// -- sony/gobreaker v2 ---------------------------------------------------------------------------
func gobreakerBreaker(values map[string]any) (*Instance, error) {
	p := readParams(values, "maxRequests", "interval", "bucketPeriod", "timeout", "readyToTrip", "consecutiveFailures",
		"minRequests", "failureRatio")
	settings := gobreaker.Settings{
		Name:         "rbl",
		MaxRequests:  uint32(p.integer("maxRequests", 0, maxInt, 0)),
		Interval:     p.duration("interval", 0),
		BucketPeriod: p.duration("bucketPeriod", 0),
		Timeout:      p.duration("timeout", 60*time.Second),
		// a call cut short by the job's limits says nothing about the target
		IsExcluded: func(err error) bool { return err != nil && !isRequestFailed(err) },
	}
	if p.has("timeout") && settings.Timeout <= 0 {
		p.fail("`timeout` must be above 0 (gobreaker takes 0 as its default, 60 s)")
	}
	if settings.BucketPeriod > 0 {
		// gobreaker keeps interval / bucketPeriod buckets (rounded up): as many as a window may keep
		if settings.Interval <= 0 {
			p.fail("`bucketPeriod` needs an `interval` above 0 (the rolling window it divides)")
		} else if buckets := (settings.Interval + settings.BucketPeriod - 1) / settings.BucketPeriod; buckets > maxWindow {
			p.fail("`interval` / `bucketPeriod` makes %d buckets; at most %d", int64(buckets), maxWindow)
		}
	}
	// every parameter is checked, also those the other readyToTrip ignores
	limit := uint32(p.integer("consecutiveFailures", 0, maxInt, 5))
	least := uint32(p.integer("minRequests", 0, maxInt, 0))
	ratio := p.number("failureRatio", 0, 1, 0.5)
	switch p.choice("readyToTrip", "CONSECUTIVE_FAILURES", "CONSECUTIVE_FAILURES", "FAILURE_RATIO") {
	case "CONSECUTIVE_FAILURES":
		settings.ReadyToTrip = func(counts gobreaker.Counts) bool { return counts.ConsecutiveFailures > limit }
	case "FAILURE_RATIO":
		settings.ReadyToTrip = func(counts gobreaker.Counts) bool {
			return counts.Requests >= least && counts.Requests > 0 &&
				float64(counts.TotalFailures)/float64(counts.Requests) >= ratio
		}
	}
	if p.err != nil {
		return nil, p.err
	}
	breaker := gobreaker.NewCircuitBreaker[any](settings)
	return &Instance{Wrap: func(next Operation) Operation {
		return func(ctx context.Context) (any, error) {
			result, err := breaker.Execute(func() (any, error) { return next(ctx) })
			return result, refused(err)
		}
	}}, nil
}

// -- cenkalti/backoff v5 -------------------------------------------------------------------------
func backoffRetry(values map[string]any) (*Instance, error) {
	p := readParams(values, "maxTries", "maxElapsedTime", "backOff", "initialInterval", "randomizationFactor",
		"multiplier", "maxInterval", "interval")
	maxTries := uint(p.integer("maxTries", 0, maxInt, 0))
	maxElapsed := p.duration("maxElapsedTime", backoff.DefaultMaxElapsedTime)
	kind := p.choice("backOff", "EXPONENTIAL", "EXPONENTIAL", "CONSTANT")
	initial := p.duration("initialInterval", backoff.DefaultInitialInterval)
	randomization := p.number("randomizationFactor", 0, 1, backoff.DefaultRandomizationFactor)
	multiplier := p.number("multiplier", 0, maxFactor, backoff.DefaultMultiplier)
	maxInterval := p.duration("maxInterval", backoff.DefaultMaxInterval)
	interval := p.duration("interval", backoff.DefaultInitialInterval)
	if p.err != nil {
		return nil, p.err
	}
	fresh := func() backoff.BackOff { // an ExponentialBackOff is not safe for concurrent use: one per call
		if kind == "CONSTANT" {
			return backoff.NewConstantBackOff(interval)
		}
		return &backoff.ExponentialBackOff{InitialInterval: initial, RandomizationFactor: randomization,
			Multiplier: multiplier, MaxInterval: maxInterval}
	}
	return &Instance{Wrap: func(next Operation) Operation {
		return func(ctx context.Context) (any, error) {
			result, err := backoff.Retry(ctx, func() (any, error) {
				result, err := next(ctx)
				if err != nil && !isRequestFailed(err) {
					return result, backoff.Permanent(err) // cut short by the job's limits: no retry
				}
				return result, err
			}, backoff.WithBackOff(fresh()), backoff.WithMaxTries(maxTries), backoff.WithMaxElapsedTime(maxElapsed))
			if err != nil && ctx.Err() != nil && !errors.As(err, new(*CutShort)) {
				return result, cause(ctx)
			}
			return result, err
		}
	}}, nil
}
