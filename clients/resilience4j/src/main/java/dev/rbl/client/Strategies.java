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
 * (../shared/reference/library-semantics.md section 1). Parameter names and units are the
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
        Decorator decorator = switch (pattern) {
            case "baseline" -> inner -> inner;
            case "retry" -> retry(params);
            case "circuit_breaker" -> circuitBreaker(params);
            default -> throw new JobError("resilience4j has no pattern `" + pattern + "`; it has "
                    + String.join(", ", PATTERNS));
        };
        params.requireAllRead();
        return decorator;
    }

    static Decorator retry(Params p) {
        int maxAttempts = (int) p.integer("maxAttempts", 3);
        String kind = p.choice("intervalFunction", "FIXED",
                List.of("FIXED", "EXPONENTIAL_BACKOFF", "EXPONENTIAL_EXACT", "RANDOMIZED", "EXPONENTIAL_RANDOM_BACKOFF"));
        long waitDuration = p.integer("waitDuration", 500);
        long initialInterval = p.integer("initialIntervalMillis", 500);
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
                .intervalFunction(interval)
                .failAfterMaxAttempts(failAfterMaxAttempts)
                .build());
        return inner -> () -> retry.executeCheckedSupplier(() -> {
            inner.run();
            return null;
        });
    }

    /**
     * The neutral model's closed form (library-semantics.md section 9): the wait before retry k is
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
                    .slowCallDurationThreshold(Duration.ofMillis(p.integer("slowCallDurationThreshold", 60_000)))
                    .slidingWindowType(SlidingWindowType.valueOf(
                            p.choice("slidingWindowType", "COUNT_BASED", List.of("COUNT_BASED", "TIME_BASED"))))
                    .slidingWindowSize((int) p.integer("slidingWindowSize", 100))
                    .minimumNumberOfCalls((int) p.integer("minimumNumberOfCalls", 100))
                    .waitDurationInOpenState(Duration.ofMillis(p.integer("waitDurationInOpenState", 60_000)))
                    .permittedNumberOfCallsInHalfOpenState((int) p.integer("permittedNumberOfCallsInHalfOpenState", 10))
                    .automaticTransitionFromOpenToHalfOpenEnabled(
                            p.bool("automaticTransitionFromOpenToHalfOpenEnabled", false))
                    .maxWaitDurationInHalfOpenState(Duration.ofMillis(p.integer("maxWaitDurationInHalfOpenState", 0)))
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
