package dev.rbl.client;

import io.github.resilience4j.circuitbreaker.CircuitBreaker;
import io.github.resilience4j.circuitbreaker.CircuitBreakerConfig;
import io.github.resilience4j.circuitbreaker.CircuitBreakerConfig.SlidingWindowType;
import io.github.resilience4j.core.IntervalFunction;
import io.github.resilience4j.retry.Retry;
import io.github.resilience4j.retry.RetryConfig;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * The patterns this client offers, each spec parameter mapped to its Resilience4j builder call
 * (docs/library-semantics.md section 1). Parameter names and units are the
 * catalogue's (rbl/libraries/prelude.rbl): durations arrive as integer milliseconds, rates as
 * percentages.
 */
final class Strategies {
    /** A call to the target through zero or more patterns; throws when the call failed. */
    interface Call {
        void run() throws Throwable;   // Resilience4j's checked decorators throw Throwable
    }

    /** Wraps a call in one pattern instance. */
    interface Decorator {
        Call wrap(Call inner);
    }

    static final List<String> PATTERNS = List.of("baseline", "retry", "circuit_breaker");

    private Strategies() {
    }

    static Decorator build(String pattern, Map<String, Object> values) {
        Params params = new Params(pattern, values);
        Decorator decorator;
        try {
            decorator = switch (pattern) {
                case "baseline" -> inner -> inner;
                case "retry" -> retry(params);
                case "circuit_breaker" -> circuitBreaker(params);
                default -> throw new JobError("resilience4j has no pattern `" + Job.shown(pattern) + "`; it has "
                        + String.join(", ", PATTERNS));
            };
        } catch (IllegalArgumentException e) {          // Resilience4j's own checks of a value
            throw new JobError(pattern + ": " + e.getMessage());
        }
        params.requireAllRead();
        return decorator;
    }

    static Decorator retry(Params p) {
        int maxAttempts = p.count("maxAttempts", 3);
        String kind = p.choice("intervalFunction", "FIXED",
                List.of("FIXED", "EXPONENTIAL_BACKOFF", "EXPONENTIAL_EXACT", "RANDOMIZED", "EXPONENTIAL_RANDOM_BACKOFF"));
        long waitDuration = p.millis("waitDuration", 500);
        long initialInterval = p.millis("initialIntervalMillis", 500);
        double multiplier = p.number("multiplier", 1.5);
        double randomization = p.number("randomizationFactor", 0.5);
        Long maxInterval = p.optionalInteger("maxIntervalMillis");
        boolean failAfterMaxAttempts = p.bool("failAfterMaxAttempts", false);
        if (maxAttempts < 1) {
            throw new JobError("retry `maxAttempts` must be >= 1, got " + maxAttempts);
        }
        IntervalFunction interval = switch (kind) {
            case "FIXED" -> IntervalFunction.of(Duration.ofMillis(waitDuration));
            case "EXPONENTIAL_BACKOFF" -> maxInterval == null
                    ? IntervalFunction.ofExponentialBackoff(initialInterval, multiplier)
                    : IntervalFunction.ofExponentialBackoff(initialInterval, multiplier, maxInterval);
            case "EXPONENTIAL_EXACT" -> exponentialExact(initialInterval, multiplier, maxInterval);
            case "RANDOMIZED" -> IntervalFunction.ofRandomized(waitDuration, randomization);
            default -> maxInterval == null
                    ? IntervalFunction.ofExponentialRandomBackoff(initialInterval, multiplier, randomization)
                    : IntervalFunction.ofExponentialRandomBackoff(initialInterval, multiplier, randomization, maxInterval);
        };
        Retry retry = Retry.of("rbl", RetryConfig.custom()
                .maxAttempts(maxAttempts)
                .intervalFunction(guarded(interval))
                .ignoreExceptions(CutShort.class)
                .failAfterMaxAttempts(failAfterMaxAttempts)
                .build());
        return inner -> () -> retry.executeCheckedSupplier(() -> {
            inner.run();
            return null;
        });
    }

    /**
     * Resilience4j sleeps the interval this returns, right after asking for it: so the wait happens
     * here instead, in the job's guard, which ends it at the job's deadline or when the caller
     * left, and Resilience4j sleeps 0.
     */
    static IntervalFunction guarded(IntervalFunction interval) {
        return attempt -> {
            long wait = interval.apply(attempt);
            JobGuard guard = JobGuard.current();
            if (guard == null) {
                return wait;
            }
            guard.sleep(wait);
            return 0L;
        };
    }

    /**
     * The neutral model's closed form (docs/library-semantics.md section 6): the wait before retry k is
     * round(initial * multiplier^(k-1)) ms, capped. ofExponentialBackoff instead truncates to a whole
     * millisecond at every step, so its waits drift below the ideal (100 instead of 101.25 for 20/1.5).
     */
    static IntervalFunction exponentialExact(long initial, double multiplier, Long max) {
        return attempt -> {
            long wait = Math.round(initial * Math.pow(multiplier, attempt - 1));
            return max == null ? wait : Math.min(wait, max);
        };
    }

    static Decorator circuitBreaker(Params p) {
        CircuitBreakerConfig config;
        try {
            config = CircuitBreakerConfig.custom()
                    .failureRateThreshold((float) p.number("failureRateThreshold", 50))
                    .slowCallRateThreshold((float) p.number("slowCallRateThreshold", 100))
                    .slowCallDurationThreshold(Duration.ofMillis(p.millis("slowCallDurationThreshold", 60_000)))
                    .slidingWindowType(SlidingWindowType.valueOf(
                            p.choice("slidingWindowType", "COUNT_BASED", List.of("COUNT_BASED", "TIME_BASED"))))
                    .slidingWindowSize(p.count("slidingWindowSize", 100))
                    .minimumNumberOfCalls(p.count("minimumNumberOfCalls", 100))
                    .waitDurationInOpenState(Duration.ofMillis(p.millis("waitDurationInOpenState", 60_000)))
                    .permittedNumberOfCallsInHalfOpenState(p.count("permittedNumberOfCallsInHalfOpenState", 10))
                    .automaticTransitionFromOpenToHalfOpenEnabled(
                            p.bool("automaticTransitionFromOpenToHalfOpenEnabled", false))
                    .maxWaitDurationInHalfOpenState(Duration.ofMillis(p.millis("maxWaitDurationInHalfOpenState", 0)))
                    .ignoreExceptions(CutShort.class)
                    .build();
        } catch (IllegalArgumentException e) {
            throw new JobError("circuit_breaker: " + e.getMessage());
        }
        CircuitBreaker breaker = CircuitBreaker.of("rbl", config);
        return inner -> () -> breaker.executeCheckedSupplier(() -> {
            inner.run();
            return null;
        });
    }
}
