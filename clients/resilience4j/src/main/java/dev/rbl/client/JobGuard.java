package dev.rbl.client;

import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;

/**
 * One running job's limits (deadline, request budget, caller still there), checked inside a call.
 * A call may run on more than one thread (a timeout runs its inner call on a worker, TimedCall):
 * the worker adopts the job's guard, so everything here may be called from any of them.
 */
final class JobGuard implements AutoCloseable {
    static final long DISCONNECT_CHECK_NS = 100_000_000L;
    private static final ThreadLocal<JobGuard> CURRENT = new ThreadLocal<>();
    // one thread for all watches (Watch): each look takes microseconds
    private static final ScheduledExecutorService WATCHER = Executors.newSingleThreadScheduledExecutor(runnable -> {
        Thread thread = new Thread(runnable, "rbl-watch");
        thread.setDaemon(true);
        return thread;
    });

    final long startedNs;
    private final long deadlineNs;
    private final long maxRequests;
    private final LongSupplier sent;
    private final BooleanSupplier callerGone;
    private long nextLookNs;            // guarded by this
    private boolean gone;              // guarded by this
    volatile Target target;            // the job's target: a timeout interrupts its request in flight

    /** `startedNs`: when the job started; `sent`: requests the job has sent so far, the call in progress included. */
    JobGuard(long startedNs, long maxDurationMs, long maxRequests, LongSupplier sent, BooleanSupplier callerGone) {
        this.startedNs = startedNs;
        this.deadlineNs = startedNs + maxDurationMs * 1_000_000L;
        this.maxRequests = maxRequests;
        this.sent = sent;
        this.callerGone = callerGone;
        CURRENT.set(this);              // for the patterns' waits, which only get a number
    }

    /** The job running on this thread, or null. */
    static JobGuard current() {
        return CURRENT.get();
    }

    /** Makes `guard` (null: none) this thread's job, for a part of a call run on a worker; returns the one it replaces. */
    static JobGuard adopt(JobGuard guard) {
        JobGuard before = CURRENT.get();
        if (guard == null) {
            CURRENT.remove();
        } else {
            CURRENT.set(guard);
        }
        return before;
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

    /** Synchronized: the job's thread, a timeout's worker and a watch may ask at once. */
    synchronized boolean callerGone() {
        long now = System.nanoTime();
        if (!gone && now - nextLookNs >= 0) {
            nextLookNs = now + DISCONNECT_CHECK_NS;
            gone = callerGone.getAsBoolean();
        }
        return gone;
    }

    /** Between calls and inside one: end it if the time is up or nobody waits for the reply. */
    void check() {
        if (TimedCall.abandoned()) {
            throw new CutShort("abandoned");
        }
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

    /** A retry's wait, in slices so that a deadline or a gone caller ends it early. */
    void sleep(long millis) {
        if (sent.getAsLong() >= maxRequests) {
            throw new CutShort("max_requests");          // no request could follow the wait
        }
        sleepNanos(Math.min(Math.max(millis, 0), remainingMs() + 1000) * 1_000_000L);
    }

    /**
     * A pattern's wait of `nanos`, in slices so that a deadline or a gone caller ends it early (cut
     * short). Parked as AtomicRateLimiter parks, to the nanosecond (Thread.sleep rounds up to a ms).
     */
    void sleepNanos(long nanos) {
        long endNs = System.nanoTime() + Math.min(Math.max(nanos, 0), (remainingMs() + 1000) * 1_000_000L);
        while (true) {
            check();
            long leftNs = Math.min(endNs - System.nanoTime(), deadlineNs - System.nanoTime());
            if (leftNs <= 0) {
                if (endNs - deadlineNs > 0) {
                    throw new CutShort("max_duration");
                }
                return;
            }
            LockSupport.parkNanos(Math.min(leftNs, DISCONNECT_CHECK_NS));
            if (Thread.interrupted()) {                  // only a timeout's cancellation interrupts a wait
                Thread.currentThread().interrupt();
                check();
                throw new CutShort("max_duration");
            }
        }
    }

    /**
     * Watches a library's own blocking wait on this thread (the bulkhead's wait for a permit), which
     * only an interrupt ends early: the watch interrupts this thread at the job's deadline or when
     * its caller left, until stopped.
     */
    Watch watch() {
        Watch watch = new Watch(Thread.currentThread());
        watch.look();
        return watch;
    }

    final class Watch {
        private final Thread waiting;
        private boolean stopped;                 // guarded by this
        private String fired;                    // the limit that interrupted the wait, guarded by this
        private ScheduledFuture<?> next;         // guarded by this

        private Watch(Thread waiting) {
            this.waiting = waiting;
        }

        private synchronized void look() {
            if (stopped) {
                return;
            }
            fired = expired() ? "max_duration" : callerGone() ? "disconnected" : null;
            if (fired != null) {
                waiting.interrupt();
                return;
            }
            long untilDeadline = Math.max(deadlineNs - System.nanoTime(), 0);
            next = WATCHER.schedule(this::look, Math.min(untilDeadline, DISCONNECT_CHECK_NS), TimeUnit.NANOSECONDS);
        }

        /**
         * Call on the waiting thread once its wait ended: the watch interrupts no more, and an
         * interrupt it made is cleared. Returns the limit that ended the wait, or null.
         */
        synchronized String stop() {
            if (!stopped) {
                stopped = true;
                if (next != null) {
                    next.cancel(false);
                }
                if (fired != null) {
                    Thread.interrupted();
                }
            }
            return fired;
        }
    }
}
