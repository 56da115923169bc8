package dev.rbl.client;

import io.github.resilience4j.bulkhead.Bulkhead;
import io.github.resilience4j.bulkhead.BulkheadConfig;
import io.github.resilience4j.circuitbreaker.CircuitBreaker;
import io.github.resilience4j.circuitbreaker.CircuitBreakerConfig;
import io.github.resilience4j.circuitbreaker.CircuitBreakerConfig.SlidingWindowType;
import io.github.resilience4j.core.IntervalFunction;
import io.github.resilience4j.core.exception.AcquirePermissionCancelledException;
import io.github.resilience4j.decorators.Decorators;
import io.github.resilience4j.ratelimiter.RateLimiter;
import io.github.resilience4j.ratelimiter.RateLimiterConfig;
import io.github.resilience4j.ratelimiter.RequestNotPermitted;
import io.github.resilience4j.retry.Retry;
import io.github.resilience4j.retry.RetryConfig;
import io.github.resilience4j.timelimiter.TimeLimiter;
import io.github.resilience4j.timelimiter.TimeLimiterConfig;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The patterns this client offers, each spec parameter mapped to its Resilience4j builder call
 * (docs/library-semantics.md section 1). Parameter names and units are the
 * catalogue's (rbl/libraries/prelude.rbl): durations arrive as integer milliseconds (the rate
 * limiter's limitRefreshPeriod as nanoseconds), rates as percentages.
 */
final class Strategies {
    /**
     * A call to the target through zero or more patterns; throws when the call failed. Returns null
     * (the target answered), or FALLBACK when a fallback replaced a failure, which the patterns
     * around it pass on as the call's value.
     */
    interface Call {
        Object run() throws Throwable;   // Resilience4j's checked decorators throw Throwable
    }

    /** The fallback pattern's value: the call failed, and the fallback answered instead. */
    static final Object FALLBACK = new Object() {
        @Override
        public String toString() {
            return "fallback";
        }
    };

    /** Wraps a call in one pattern instance. */
    interface Decorator {
        Call wrap(Call inner);

        /** Lets go of what the instance holds beyond its job's calls (a breaker's scheduled move). */
        default void close() {
        }

        /** A limit the instance moves itself: {limit, in flight} now; null for a fixed pattern. */
        default int[] limit() {
            return null;
        }
    }

    static final List<String> PATTERNS = List.of("baseline", "retry", "circuit_breaker", "timeout", "bulkhead",
            "rate_limiter", "fallback");

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
                case "timeout" -> timeout(params);
                case "bulkhead" -> bulkhead(params);
                case "rate_limiter" -> rateLimiter(params);
                case "fallback" -> fallback(params);
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
        // every parameter is checked as Resilience4j checks it, also those the chosen kind ignores
        if (initialInterval < 1 || (maxInterval != null && maxInterval < 1)) {
            throw new JobError("retry `initialIntervalMillis` and `maxIntervalMillis` must be >= 1 ms");
        }
        if (!(multiplier > 0) || randomization > 1) {
            throw new JobError("retry `multiplier` must be above 0 and `randomizationFactor` at most 1");
        }
        IntervalFunction interval = switch (kind) {
            // no wait at all is RetryConfig's waitDuration(0); IntervalFunction.of refuses under 1 ms
            case "FIXED" -> waitDuration == 0 ? attempt -> 0L : IntervalFunction.of(Duration.ofMillis(waitDuration));
            case "RANDOMIZED" -> waitDuration == 0 ? attempt -> 0L : IntervalFunction.ofRandomized(waitDuration, randomization);
            case "EXPONENTIAL_BACKOFF" -> maxInterval == null
                    ? IntervalFunction.ofExponentialBackoff(initialInterval, multiplier)
                    : IntervalFunction.ofExponentialBackoff(initialInterval, multiplier, maxInterval);
            case "EXPONENTIAL_EXACT" -> exponentialExact(initialInterval, multiplier, maxInterval);
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
        return inner -> () -> retry.executeCheckedSupplier(inner::run);
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
                    .slidingWindowSize(p.window("slidingWindowSize", 100))
                    .minimumNumberOfCalls(p.count("minimumNumberOfCalls", 100))
                    .waitDurationInOpenState(Duration.ofMillis(p.millis("waitDurationInOpenState", 60_000)))
                    .permittedNumberOfCallsInHalfOpenState(p.window("permittedNumberOfCallsInHalfOpenState", 10))
                    .automaticTransitionFromOpenToHalfOpenEnabled(
                            p.bool("automaticTransitionFromOpenToHalfOpenEnabled", false))
                    .maxWaitDurationInHalfOpenState(Duration.ofMillis(p.millis("maxWaitDurationInHalfOpenState", 0)))
                    .ignoreExceptions(CutShort.class)
                    .build();
        } catch (IllegalArgumentException e) {
            throw new JobError("circuit_breaker: " + e.getMessage());
        }
        CircuitBreaker breaker = CircuitBreaker.of("rbl", config);
        return new Decorator() {
            @Override
            public Call wrap(Call inner) {
                return () -> breaker.executeCheckedSupplier(inner::run);
            }

            /**
             * An open breaker with automaticTransitionFromOpenToHalfOpenEnabled (or a half-open one
             * with maxWaitDurationInHalfOpenState) has a task on Resilience4j's one scheduler that
             * holds the breaker and its window until it runs. Any transition cancels it, and a
             * cancelled task drops its callable at once; reset() would not cancel it.
             */
            @Override
            public void close() {
                breaker.transitionToDisabledState();
            }
        };
    }

    /**
     * TimeLimiter.executeFutureSupplier over the inner call started on a worker (TimedCall): it waits
     * timeoutDuration for it, then cancels it (cancelRunningFuture, always) and throws a
     * TimeoutException. TimedCall's cancel stops the request in flight.
     */
    static Decorator timeout(Params p) {
        long timeoutDuration = p.millis("timeoutDuration", 1000);
        if (timeoutDuration < 1) {
            throw new JobError("timeout `timeoutDuration` must be >= 1 ms, got " + timeoutDuration);
        }
        TimeLimiter limiter = TimeLimiter.of("rbl", TimeLimiterConfig.custom()
                .timeoutDuration(Duration.ofMillis(timeoutDuration))
                .cancelRunningFuture(true)
                .build());
        return inner -> () -> limiter.executeFutureSupplier(() -> TimedCall.start(inner));
    }

    /**
     * The semaphore Bulkhead's own decorator (Bulkhead.executeCheckedSupplier). Its wait for a permit
     * (Semaphore.tryAcquire(maxWaitDuration)) ends early only on an interrupt: a watch of the job's
     * limits interrupts it, and the call is then cut short rather than refused.
     */
    static Decorator bulkhead(Params p) {
        long maxWaitDuration = p.millis("maxWaitDuration", 0);
        Bulkhead bulkhead = Bulkhead.of("rbl", BulkheadConfig.custom()
                .maxConcurrentCalls(p.count("maxConcurrentCalls", 25))
                .maxWaitDuration(Duration.ofMillis(maxWaitDuration))
                .fairCallHandlingStrategyEnabled(p.bool("fairCallHandling", true))
                .build());
        if (maxWaitDuration == 0) {
            return inner -> () -> bulkhead.executeCheckedSupplier(inner::run);   // tryAcquire(0) never blocks
        }
        return inner -> () -> {
            JobGuard.Watch watch = guard().watch();
            try {
                return bulkhead.executeCheckedSupplier(() -> {
                    watch.stop();               // the permit is held: the call itself is not watched
                    return inner.run();
                });
            } catch (AcquirePermissionCancelledException e) {
                String limit = watch.stop();
                throw limit == null ? e : new CutShort(limit);   // not ours: a timeout's cancellation
            } finally {
                watch.stop();
            }
        };
    }

    /**
     * RateLimiter.decorateCheckedSupplier's steps (waitForPermission, then onResult or onError), the
     * wait done by the job's guard, which ends it at the job's limits: reservePermission() is the
     * same AtomicRateLimiter arithmetic as the blocking acquirePermission(), returning the nanoseconds
     * to wait (or -1: no permit within timeoutDuration) instead of parking the thread.
     */
    static Decorator rateLimiter(Params p) {
        long timeoutDuration = p.millis("timeoutDuration", 5000);
        RateLimiter limiter = RateLimiter.of("rbl", RateLimiterConfig.custom()
                .limitForPeriod(p.count("limitForPeriod", 50))
                .limitRefreshPeriod(Duration.ofNanos(p.nanos("limitRefreshPeriod", 500)))
                .timeoutDuration(Duration.ofMillis(timeoutDuration))
                .build());
        long timeoutNs = timeoutDuration * 1_000_000L;
        return inner -> () -> {
            waitForPermission(limiter, timeoutNs);
            try {
                Object result = inner.run();
                limiter.onResult(result);
                return result;
            } catch (Exception e) {
                limiter.onError(e);
                throw e;
            }
        };
    }

    /**
     * RateLimiter.waitForPermission with the guard's wait. A call refused waits the whole
     * timeoutDuration first, as AtomicRateLimiter.waitForPermissionIfNecessary does.
     */
    static void waitForPermission(RateLimiter limiter, long timeoutNs) {
        long wait = limiter.reservePermission();
        if (wait == 0) {
            return;
        }
        guard().sleepNanos(wait < 0 ? timeoutNs : wait);
        if (wait < 0) {
            throw RequestNotPermitted.createRequestNotPermitted(limiter);
        }
    }

    /** Decorators.withFallback: whatever the inner call throws, the handler's value is returned instead. */
    static Decorator fallback(Params p) {
        return inner -> () -> Decorators.ofCheckedSupplier(inner::run)
                .withFallback(Strategies::fallbackValue)
                .get();
    }

    /**
     * The fallback handler. The job's own end (CutShort: its deadline, request budget or caller) is
     * no failure of the call and goes through, as a JVM Error does.
     */
    static Object fallbackValue(Throwable failure) throws Throwable {
        if (failure instanceof CutShort || failure instanceof Error) {
            throw failure;
        }
        return FALLBACK;
    }

    private static JobGuard guard() {
        return Objects.requireNonNull(JobGuard.current(), "a pattern's wait outside a job");
    }
}
