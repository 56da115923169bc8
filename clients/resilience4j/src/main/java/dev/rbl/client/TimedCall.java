package dev.rbl.client;

import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The inner call of a timeout, run on a worker thread as the Future that Resilience4j's TimeLimiter
 * waits for (TimeLimiter.executeFutureSupplier: future.get(timeoutDuration), then future.cancel(true)).
 *
 * Cancelling it must really stop the call: Thread.interrupt() does not end a blocking socket read,
 * so cancel() also closes the job's request in flight (recorded then, once, with status 0 and its
 * duration up to the interruption), and the worker, abandoned, may send no request and wait no more.
 *
 * The TimeLimiter's clock starts when the call is handed to a worker, and a busy machine may run the
 * worker 10 ms later: the call's first request is therefore stamped as beginning at the hand-off
 * (requestBegin), so a cut request's duration is the time the timeout really gave it.
 */
final class TimedCall extends FutureTask<Object> {
    // shared by all jobs: a thread per running timed call, reused, none created per call when idle ones exist
    private static final ExecutorService WORKERS = Executors.newCachedThreadPool(runnable -> {
        Thread thread = new Thread(runnable, "rbl-timeout");
        thread.setDaemon(true);
        return thread;
    });
    private static final ThreadLocal<TimedCall> CURRENT = new ThreadLocal<>();

    private final JobGuard guard;
    private final TimedCall parent;         // the timed call this one runs inside, or null
    private final long handedOffNs = System.nanoTime();     // before the worker runs it, so before the timer
    private boolean requestSent;            // only its worker thread reads and writes it

    private TimedCall(Callable<Object> inner, JobGuard guard, TimedCall parent) {
        super(inner);
        this.guard = guard;
        this.parent = parent;
    }

    /** Starts `inner` on a worker, as part of the job running on this thread. */
    static TimedCall start(Strategies.Call inner) {
        TimedCall call = new TimedCall(() -> run(inner), JobGuard.current(), CURRENT.get());
        WORKERS.execute(call);
        return call;
    }

    private static Object run(Strategies.Call inner) throws Exception {
        try {
            return inner.run();
        } catch (Exception | Error e) {
            throw e;
        } catch (Throwable other) {             // no pattern throws one; Callable cannot
            throw new ExecutionException(other);
        }
    }

    /**
     * When a request sent now on this thread begins: a timed call's first request at the call's
     * hand-off to its worker (the timeout's clock was already running), any other one now.
     */
    static long requestBegin(long nowNs) {
        TimedCall call = CURRENT.get();
        if (call == null || call.requestSent) {
            return nowNs;
        }
        call.requestSent = true;
        return Math.min(nowNs, call.handedOffNs);
    }

    /** True on a worker whose timed call, or one it runs inside, was cancelled: its result is no one's. */
    static boolean abandoned() {
        for (TimedCall call = CURRENT.get(); call != null; call = call.parent) {
            if (call.isCancelled()) {
                return true;
            }
        }
        return false;
    }

    @Override
    public void run() {
        JobGuard before = JobGuard.adopt(guard);
        CURRENT.set(this);
        try {
            super.run();
        } finally {
            CURRENT.remove();
            JobGuard.adopt(before);
        }
    }

    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
        boolean cancelled = super.cancel(mayInterruptIfRunning);   // abandoned() from now on
        if (cancelled && guard != null && guard.target != null) {
            guard.target.interruptRequest();
        }
        return cancelled;
    }

    /**
     * TimeLimiter's wait. When the thread waiting is itself a cancelled timed call's worker (nested
     * timeouts), the interrupt ends this wait: this call is then cancelled too, since TimeLimiter
     * lets the InterruptedException through without cancelling it.
     */
    @Override
    public Object get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException, TimeoutException {
        try {
            return super.get(timeout, unit);
        } catch (InterruptedException e) {
            cancel(true);
            throw e;
        }
    }
}
