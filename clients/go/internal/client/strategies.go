package client

// Resilience patterns built from the real libraries. Parameters arrive library-native, named as
// the library names them and in the catalogue's units (rbl/libraries/prelude.rbl: durations in
// milliseconds), exactly as the plan holds them. A parameter the library does not have is a 400.

import (
	"context"
	"errors"
	"math"
	"runtime/debug"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
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
		map[string]Builder{"baseline": baseline, "retry": failsafeRetry, "circuit_breaker": failsafeBreaker},
		[]string{"baseline", "retry", "circuit_breaker"}},
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

func baseline(values map[string]any) (Wrapper, error) {
	if p := readParams(values); p.err != nil {
		return nil, p.err
	}
	return func(next Operation) Operation { return next }, nil
}

// -- failsafe-go --------------------------------------------------------------------------------
func failsafeRetry(values map[string]any) (Wrapper, error) {
	p := readParams(values, "maxAttempts", "delay", "maxDelay", "delayFactor", "delayMin", "delayMax", "jitter",
		"jitterFactor", "maxDuration")
	builder := retrypolicy.NewBuilder[any]().
		HandleIf(func(_ any, err error) bool { return isRequestFailed(err) }). // a cut-short call is not retried
		ReturnLastFailure().
		WithMaxAttempts(int(p.integer("maxAttempts", 1, math.MaxInt64, 3)))
	delay := p.duration("delay", 0)
	switch {
	case p.has("delayMin") || p.has("delayMax"):
		low, high := p.duration("delayMin", 0), p.duration("delayMax", 0)
		if low <= 0 || high < low {
			p.fail("`delayMin` and `delayMax` must both be given, with 0 < delayMin <= delayMax")
		}
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
	if p.err != nil {
		return nil, p.err
	}
	policy := builder.Build()
	return func(next Operation) Operation {
		return func(ctx context.Context) error {
			_, err := failsafe.With[any](policy).WithContext(ctx).Get(func() (any, error) { return nil, next(ctx) })
			return err
		}
	}, nil
}

func failsafeBreaker(values map[string]any) (Wrapper, error) {
	p := readParams(values, "failureThreshold", "failureThresholdingCapacity", "failureThresholdingPeriod",
		"failureRateThreshold", "failureExecutionThreshold", "delay", "successThreshold", "successThresholdingCapacity")
	builder := circuitbreaker.NewBuilder[any]().
		HandleIf(func(_ any, err error) bool { return isRequestFailed(err) }).
		WithDelay(p.duration("delay", time.Minute))
	threshold := uint(p.integer("failureThreshold", 1, math.MaxUint32, 1))
	period := p.duration("failureThresholdingPeriod", 0)
	switch {
	case p.has("failureRateThreshold"):
		rate := p.number("failureRateThreshold", 0, 100, 0) / 100
		executions := uint(p.integer("failureExecutionThreshold", 1, math.MaxUint32, 1))
		if period <= 0 {
			p.fail("`failureRateThreshold` needs `failureThresholdingPeriod` (WithFailureRateThreshold(rate, executions, period))")
		}
		builder.WithFailureRateThreshold(rate, executions, period)
	case period > 0:
		builder.WithFailureThresholdPeriod(threshold, period)
	default:
		capacity := uint(p.integer("failureThresholdingCapacity", 1, math.MaxUint32, int64(threshold)))
		if capacity < threshold {
			p.fail("`failureThresholdingCapacity` must be at least `failureThreshold`")
		}
		builder.WithFailureThresholdRatio(threshold, capacity)
	}
	if p.has("successThreshold") {
		successes := uint(p.integer("successThreshold", 1, math.MaxUint32, 1))
		capacity := uint(p.integer("successThresholdingCapacity", 1, math.MaxUint32, int64(successes)))
		if capacity < successes {
			p.fail("`successThresholdingCapacity` must be at least `successThreshold`")
		}
		builder.WithSuccessThresholdRatio(successes, capacity)
	}
	if p.err != nil {
		return nil, p.err
	}
	breaker := builder.Build()
	return func(next Operation) Operation {
		return func(ctx context.Context) error {
			_, err := failsafe.With[any](breaker).WithContext(ctx).Get(func() (any, error) { return nil, next(ctx) })
			return err
		}
	}, nil
}

// -- sony/gobreaker v2 ---------------------------------------------------------------------------
func gobreakerBreaker(values map[string]any) (Wrapper, error) {
	p := readParams(values, "maxRequests", "interval", "bucketPeriod", "timeout", "readyToTrip", "consecutiveFailures",
		"minRequests", "failureRatio")
	settings := gobreaker.Settings{
		Name:         "rbl",
		MaxRequests:  uint32(p.integer("maxRequests", 0, math.MaxUint32, 0)),
		Interval:     p.duration("interval", 0),
		BucketPeriod: p.duration("bucketPeriod", 0),
		Timeout:      p.duration("timeout", 60*time.Second),
		// a call cut short by the job's limits says nothing about the target
		IsExcluded: func(err error) bool { return err != nil && !isRequestFailed(err) },
	}
	if p.has("timeout") && settings.Timeout <= 0 {
		p.fail("`timeout` must be above 0 (gobreaker takes 0 as its default, 60 s)")
	}
	switch p.choice("readyToTrip", "CONSECUTIVE_FAILURES", "CONSECUTIVE_FAILURES", "FAILURE_RATIO") {
	case "CONSECUTIVE_FAILURES":
		limit := uint32(p.integer("consecutiveFailures", 0, math.MaxUint32, 5))
		settings.ReadyToTrip = func(counts gobreaker.Counts) bool { return counts.ConsecutiveFailures > limit }
	case "FAILURE_RATIO":
		least := uint32(p.integer("minRequests", 0, math.MaxUint32, 0))
		ratio := p.number("failureRatio", 0, 1, 0.5)
		settings.ReadyToTrip = func(counts gobreaker.Counts) bool {
			return counts.Requests >= least && counts.Requests > 0 &&
				float64(counts.TotalFailures)/float64(counts.Requests) >= ratio
		}
	}
	if p.err != nil {
		return nil, p.err
	}
	breaker := gobreaker.NewCircuitBreaker[any](settings)
	return func(next Operation) Operation {
		return func(ctx context.Context) error {
			_, err := breaker.Execute(func() (any, error) { return nil, next(ctx) })
			return err
		}
	}, nil
}

// -- cenkalti/backoff v5 -------------------------------------------------------------------------
func backoffRetry(values map[string]any) (Wrapper, error) {
	p := readParams(values, "maxTries", "maxElapsedTime", "backOff", "initialInterval", "randomizationFactor",
		"multiplier", "maxInterval", "interval")
	maxTries := uint(p.integer("maxTries", 0, math.MaxUint32, 0))
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
	return func(next Operation) Operation {
		return func(ctx context.Context) error {
			_, err := backoff.Retry(ctx, func() (any, error) {
				err := next(ctx)
				if err != nil && !isRequestFailed(err) {
					return nil, backoff.Permanent(err) // cut short by the job's limits: no retry
				}
				return nil, err
			}, backoff.WithBackOff(fresh()), backoff.WithMaxTries(maxTries), backoff.WithMaxElapsedTime(maxElapsed))
			if err != nil && ctx.Err() != nil && !errors.As(err, new(*CutShort)) {
				return cause(ctx)
			}
			return err
		}
	}, nil
}
