package dev.rbl.client;

import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;

/** One running job's limits (deadline, request budget, caller still there), checked inside a call. */
final class JobGuard implements AutoCloseable {
    static final long DISCONNECT_CHECK_NS = 100_000_000L;
    private static final ThreadLocal<JobGuard> CURRENT = new ThreadLocal<>();

    final long startedNs;
    private final long deadlineNs;
    private final long maxRequests;
    private final LongSupplier sent;
    private final BooleanSupplier callerGone;
    private long nextLookNs;
    private boolean gone;

    /** `sent`: requests the job has sent so far, the call in progress included. */
    JobGuard(long maxDurationMs, long maxRequests, LongSupplier sent, BooleanSupplier callerGone) {
        this.startedNs = System.nanoTime();
        this.deadlineNs = startedNs + maxDurationMs * 1_000_000L;
        this.maxRequests = maxRequests;
        this.sent = sent;
        this.callerGone = callerGone;
        CURRENT.set(this);              // for the retry's interval function, which only gets a number
    }

    /** The job running on this thread, or null. */
    static JobGuard current() {
        return CURRENT.get();
    }

    @Override
    public void close() {
        CURRENT.remove();
    }

    long remainingMs() {
        return Math.max(0, (deadlineNs - System.nanoTime()) / 1_000_000L);
    }

    boolean expired() {
        return System.nanoTime() - deadlineNs >= 0;
    }

    boolean callerGone() {
        long now = System.nanoTime();
        if (!gone && now - nextLookNs >= 0) {
            nextLookNs = now + DISCONNECT_CHECK_NS;
            gone = callerGone.getAsBoolean();
        }
        return gone;
    }

    /** Between calls and inside one: end it if the time is up or nobody waits for the reply. */
    void check() {
        if (expired()) {
            throw new CutShort("max_duration");
        }
        if (callerGone()) {
            throw new CutShort("disconnected");
        }
    }

    void beforeRequest() {
        if (sent.getAsLong() >= maxRequests) {
            throw new CutShort("max_requests");
        }
        check();
    }

    /** A pattern's wait, in slices so that a deadline or a gone caller ends it early. */
    void sleep(long millis) {
        if (sent.getAsLong() >= maxRequests) {
            throw new CutShort("max_requests");          // no request could follow the wait
        }
        long endNs = System.nanoTime() + Math.min(Math.max(millis, 0), remainingMs() + 1000) * 1_000_000L;
        while (true) {
            check();
            long leftNs = Math.min(endNs - System.nanoTime(), deadlineNs - System.nanoTime());
            if (leftNs <= 0) {
                if (endNs - deadlineNs > 0) {
                    throw new CutShort("max_duration");
                }
                return;
            }
            try {
                TimeUnit.NANOSECONDS.sleep(Math.min(leftNs, DISCONNECT_CHECK_NS));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CutShort("max_duration");
            }
        }
    }
}
