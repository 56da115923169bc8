package dev.rbl.client;

import com.netflix.concurrency.limits.Limit;
import com.netflix.concurrency.limits.Limiter;
import com.netflix.concurrency.limits.limit.AIMDLimit;
import com.netflix.concurrency.limits.limit.Gradient2Limit;
import com.netflix.concurrency.limits.limit.VegasLimit;
import com.netflix.concurrency.limits.limiter.SimpleLimiter;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Netflix concurrency-limits (concurrency-limits-core): a SimpleLimiter whose limit one of the
 * library's Limit algorithms moves with every call's round-trip time (docs/library-semantics.md).
 * Parameter names and defaults are the algorithms' builders' (rbl/libraries/prelude.rbl).
 */
final class Limiters {
    static final String LIBRARY = "concurrency_limits";
    static final List<String> PATTERNS = List.of("baseline", "vegas", "gradient2", "aimd");

    /** A call the limiter refused: its limit was reached (reported as a bulkhead's refusal). */
    static final class LimitExceeded extends RuntimeException {
        LimitExceeded() {
            super("concurrency limit reached", null, false, false);
        }
    }

    private Limiters() {
    }

    static Strategies.Decorator build(String pattern, Map<String, Object> values) {
        Params params = new Params(LIBRARY, pattern, values);
        Limit limit;
        try {
            limit = switch (pattern) {
                case "baseline" -> null;
                case "vegas" -> vegas(params);
                case "gradient2" -> gradient2(params);
                case "aimd" -> aimd(params);
                default -> throw new JobError(LIBRARY + " has no pattern `" + Job.shown(pattern) + "`; it has "
                        + String.join(", ", PATTERNS));
            };
        } catch (IllegalArgumentException e) {          // the library's own checks of a value
            throw new JobError(pattern + ": " + e.getMessage());
        }
        params.requireAllRead();
        if (limit == null) {
            return inner -> inner;
        }
        return limited(SimpleLimiter.newBuilder().limit(limit).build());
    }

    /**
     * Each call acquires a permit first; without one it is refused and sends no request. Its outcome
     * goes to the limit as the library's own clients report it: a success as a sample, a 503 or a
     * request that got no answer (the gRPC client's UNAVAILABLE) as a drop, anything else ignored.
     */
    static Strategies.Decorator limited(SimpleLimiter<Void> limiter) {
        return new Strategies.Decorator() {
            @Override
            public Strategies.Call wrap(Strategies.Call inner) {
                return limitedCall(limiter, inner);
            }

            @Override
            public int[] limit() {
                return new int[] {limiter.getLimit(), limiter.getInflight()};
            }
        };
    }

    private static Strategies.Call limitedCall(Limiter<Void> limiter, Strategies.Call inner) {
        return () -> {
            Optional<Limiter.Listener> permit = limiter.acquire(null);
            if (permit.isEmpty()) {
                throw new LimitExceeded();
            }
            Limiter.Listener listener = permit.get();
            try {
                Object result = inner.run();
                listener.onSuccess();
                return result;
            } catch (Target.RequestFailed failed) {
                if (failed.status == 503 || failed.status == 0) {
                    listener.onDropped();
                } else {
                    listener.onIgnore();
                }
                throw failed;
            } catch (Throwable other) {                 // cut short by the job, or the JVM's trouble
                listener.onIgnore();
                throw other;
            }
        };
    }

    /** VegasLimit: alpha and beta fixed when given, else the library's 3 and 6 x log10(limit). */
    static Limit vegas(Params p) {
        Bounds limits = bounds(p, false, "maxConcurrency", 1000);
        double smoothing = p.number("smoothing", 1.0);
        Integer alpha = p.optionalWindow("alpha");
        Integer beta = p.optionalWindow("beta");
        int probeMultiplier = p.window("probeMultiplier", 30);
        if (smoothing > 1) {
            throw new JobError("vegas `smoothing` must be at most 1, got " + smoothing);
        }
        if (probeMultiplier < 1) {
            throw new JobError("vegas `probeMultiplier` must be at least 1, got " + probeMultiplier);
        }
        VegasLimit.Builder builder = VegasLimit.newBuilder().initialLimit(limits.initial()).maxConcurrency(limits.max())
                .smoothing(smoothing).probeMultiplier(probeMultiplier);
        if (alpha != null) {
            builder.alpha(alpha);
        }
        if (beta != null) {
            builder.beta(beta);
        }
        return builder.build();
    }

    static Limit gradient2(Params p) {
        Bounds limits = bounds(p, true, "maxConcurrency", 200);
        double smoothing = p.number("smoothing", 0.2);
        int queueSize = p.window("queueSize", 4);
        int longWindow = p.window("longWindow", 600);
        double rttTolerance = p.number("rttTolerance", 1.5);
        if (smoothing > 1 || longWindow < 1) {
            throw new JobError("gradient2 `smoothing` must be at most 1 and `longWindow` at least 1");
        }
        return Gradient2Limit.newBuilder().initialLimit(limits.initial()).minLimit(limits.min())
                .maxConcurrency(limits.max()).smoothing(smoothing).queueSize(queueSize).longWindow(longWindow)
                .rttTolerance(rttTolerance)            // the library refuses under 1.0
                .build();
    }

    static Limit aimd(Params p) {
        Bounds limits = bounds(p, true, "maxLimit", 200);
        double backoffRatio = p.number("backoffRatio", 0.9);
        long timeout = p.millis("timeout", 5000);
        return AIMDLimit.newBuilder().initialLimit(limits.initial()).minLimit(limits.min()).maxLimit(limits.max())
                .backoffRatio(backoffRatio)            // the library refuses outside [0.5, 1)
                .timeout(timeout, TimeUnit.MILLISECONDS)  // and a timeout of 0
                .build();
    }

    /** A limit's bounds as an algorithm's builder takes them (min 1 where it has no minLimit). */
    private record Bounds(int min, int initial, int max) {
    }

    /**
     * initialLimit (20 in every builder), minLimit (20) where the algorithm has one, and its maximum.
     * The library only logs a warning when the initial limit is outside the bounds, and the limit
     * then jumps inside them at the first sample: rbl refuses it, as `rbl check` does.
     */
    private static Bounds bounds(Params p, boolean hasMin, String maxName, int maxDefault) {
        int initial = p.window("initialLimit", 20);
        int min = hasMin ? p.window("minLimit", 20) : 1;
        int max = p.window(maxName, maxDefault);
        if (initial < 1 || min < 1 || !(min <= initial && initial <= max)) {
            throw new JobError("`initialLimit` must lie between " + (hasMin ? "`minLimit`" : "1") + " and `"
                    + maxName + "` (at least 1), got " + min + " <= " + initial + " <= " + max);
        }
        return new Bounds(min, initial, max);
    }
}
