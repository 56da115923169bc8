package dev.rbl.client;

import io.github.resilience4j.bulkhead.BulkheadFullException;
import io.github.resilience4j.circuitbreaker.CallNotPermittedException;
import io.github.resilience4j.ratelimiter.RequestNotPermitted;
import java.util.Objects;
import java.util.concurrent.TimeoutException;

/**
 * How a library pattern, not the target's answer, ended a call (clients/protocol.py, "How a failed
 * call ended"): a refusal with the time to it, a timeout, or a fallback. NONE: the target decided.
 */
record CallEnding(String rejected, long waitUs, boolean timedOut, boolean fallback) {
    static final CallEnding NONE = new CallEnding(null, 0, false, false);
    static final CallEnding TIMED_OUT = new CallEnding(null, 0, true, false);
    static final CallEnding FALLBACK = new CallEnding(null, 0, false, true);

    /** The ending of a call that returned `value` (Strategies.FALLBACK when a fallback answered). */
    static CallEnding ofValue(Object value) {
        return value == Strategies.FALLBACK ? FALLBACK : NONE;
    }

    /** The ending of a call that failed with `failure`, `startedNs` its start. */
    static CallEnding ofFailure(Throwable failure, long startedNs) {
        String refusal = refusal(failure);
        if (refusal != null) {
            return new CallEnding(refusal, (System.nanoTime() - startedNs) / 1000, false, false);
        }
        // only TimeLimiter throws it: a socket's timeout is an IOException, a failed request
        return failure instanceof TimeoutException ? TIMED_OUT : NONE;
    }

    private static String refusal(Throwable failure) {
        if (failure instanceof CallNotPermittedException) {
            return "circuit_breaker";
        }
        if (failure instanceof BulkheadFullException || failure instanceof Limiters.LimitExceeded) {
            return "bulkhead";
        }
        if (failure instanceof RequestNotPermitted) {
            return "rate_limiter";
        }
        return null;
    }

    /** Whether two request-less calls may share one run-length encoded record. */
    boolean sameKind(CallEnding other) {
        return Objects.equals(rejected, other.rejected) && timedOut == other.timedOut && fallback == other.fallback;
    }

    /** This ending with `other`'s wait added (a run of equal calls sums its waits). */
    CallEnding plusWait(CallEnding other) {
        return other.waitUs == 0 ? this : new CallEnding(rejected, waitUs + other.waitUs, timedOut, fallback);
    }

    /** The reply's fields, each with a leading comma; empty for NONE. */
    String json() {
        StringBuilder out = new StringBuilder();
        if (rejected != null) {
            out.append(",\"rejected\":\"").append(rejected).append("\",\"wait_us\":").append(waitUs);
        }
        if (timedOut) {
            out.append(",\"timed_out\":true");
        }
        if (fallback) {
            out.append(",\"fallback\":true");
        }
        return out.toString();
    }
}
