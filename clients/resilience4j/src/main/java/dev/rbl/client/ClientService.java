package dev.rbl.client;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.BooleanSupplier;

/** Runs virtual users' jobs in the paper's loop and reports raw observations (protocol v1). */
final class ClientService {
    static final int PROTOCOL = 1;
    static final String ONE_CALL_STOP = "calls";      // a /call's stopped_by when its one call ended by itself
    private static final int SHARED_INSTANCES_KEPT = 256;

    final Library library;
    // the /calls' connections to the target; idle ones kept: protocol.py's MAX_JOBS
    private final TargetConnections calls = new TargetConnections(512);
    // share: client keeps one pattern instance per key across virtual users (least recently used out)
    private final Map<String, Shared> shared = new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Shared> eldest) {
            if (size() <= SHARED_INSTANCES_KEPT) {
                return false;
            }
            eldest.getValue().decorator().close();
            return true;
        }
    };

    /** A shared pattern instance, with the jobs' instance name and the pattern it was built for. */
    private record Shared(Strategies.Decorator decorator, String instance, String pattern) {
    }

    ClientService(Library library) {
        this.library = library;
    }

    /** The reply's opening: protocol, library and its version. */
    private String opening() {
        return "{\"protocol\":1,\"library\":" + Json.quote(library.name()) + ",\"version\":"
                + Json.quote(library.version());
    }

    String health() {
        StringBuilder out = new StringBuilder(opening()).append(",\"patterns\":[");
        for (int i = 0; i < library.patterns().size(); i++) {
            out.append(i == 0 ? "" : ",").append(Json.quote(library.patterns().get(i)));
        }
        return out.append("],\"endpoints\":[\"/run\",\"/call\"]}").toString();
    }

    /** GET /limits: every shared instance whose limit adapts, with its jobs' instance name. */
    String limits() {
        StringBuilder out = new StringBuilder(opening()).append(",\"limits\":[");
        synchronized (shared) {
            String separator = "";
            for (Shared entry : shared.values()) {
                int[] limit = entry.decorator().limit();
                if (limit == null) {
                    continue;
                }
                out.append(separator).append("{\"instance\":").append(Json.quote(entry.instance()))
                        .append(",\"pattern\":").append(Json.quote(entry.pattern())).append(",\"limit\":")
                        .append(limit[0]).append(",\"inflight\":").append(limit[1]).append('}');
                separator = ",";
            }
        }
        return out.append("]}").toString();
    }

    private Strategies.Decorator decorator(Job job, int position) {
        Job.Step step = job.strategy().get(position);
        if (job.share().equals("user")) {
            return library.builder().build(step.pattern(), step.params());
        }
        String key = job.instance() + "\u0000" + position + "\u0000" + step.pattern() + "\u0000"
                + new TreeMap<>(step.params());
        synchronized (shared) {
            Shared entry = shared.get(key);
            if (entry == null) {
                entry = new Shared(library.builder().build(step.pattern(), step.params()), job.instance(),
                        step.pattern());
                shared.put(key, entry);
            }
            return entry.decorator();
        }
    }

    String run(Job job, BooleanSupplier callerGone) {
        return run(job, callerGone, 0);
    }

    /** A /run job (maxCalls 0), or with maxCalls 1 a /call: the same loop, ended after one call. */
    String run(Job job, BooleanSupplier callerGone, int maxCalls) {
        // the job starts before its patterns are built: a rate limiter's cycles count from its creation,
        // so they must not begin before the job's clock does (start_us 0)
        long startedNs = System.nanoTime();
        List<Strategies.Decorator> decorators = new ArrayList<>();
        try {
            for (int i = 0; i < job.strategy().size(); i++) {
                decorators.add(decorator(job, i));
            }
            return run(job, callerGone, maxCalls, decorators, startedNs);
        } finally {
            if (job.share().equals("user")) {             // the job's own instances; shared ones stay
                decorators.forEach(Strategies.Decorator::close);
            }
        }
    }

    private String run(Job job, BooleanSupplier callerGone, int maxCalls, List<Strategies.Decorator> decorators,
                       long startedNs) {
        CallLog log = new CallLog();
        Target[] target = new Target[1];
        String stoppedBy;
        long started;
        try (JobGuard guard = new JobGuard(startedNs, job.maxDurationMs(), job.maxRequests(),
                () -> log.requests + target[0].requestCount(), callerGone)) {
            started = guard.startedNs;
            target[0] = new Target(job.target().host(), job.target().port(), job.path(), started, guard,
                    maxCalls == 1 ? calls : null);
            guard.target = target[0];
            Strategies.Call call = target[0]::send;
            for (int i = decorators.size() - 1; i >= 0; i--) {       // outermost first in the job
                call = decorators.get(i).wrap(call);
            }
            try {
                stoppedBy = loop(job, call, target[0], log, guard, maxCalls);
            } finally {
                target[0].release();
            }
        }
        if (maxCalls == 1 && log.calls == 0) {     // the deadline or the caller went before the call began
            log.addCutShort(List.of());
        }
        long totalUs = (System.nanoTime() - started) / 1000;
        return opening() + ",\"vu\":" + job.vu() + ",\"total_us\":" + totalUs + ",\"stopped_by\":\"" + stoppedBy
                + "\",\"calls\":" + log.toJson() + "}";
    }

    /** The paper's loop: the limits are checked before each call, and inside it by the guard. */
    private static String loop(Job job, Strategies.Call call, Target target, CallLog log, JobGuard guard,
                               int maxCalls) {
        for (int made = 0; ; made++) {
            if (maxCalls > 0 && made == maxCalls) {
                return ONE_CALL_STOP;
            }
            if (log.successfulCalls >= job.successes()) {
                return "successes";
            }
            if (log.requests >= job.maxRequests()) {
                return "max_requests";
            }
            if (guard.expired()) {
                return "max_duration";
            }
            if (guard.callerGone()) {
                return "disconnected";
            }
            target.newCall();
            long callStartedNs = System.nanoTime();
            boolean ok;
            CallEnding ending;
            try {
                ending = CallEnding.ofValue(call.run());
                ok = !ending.fallback();        // a fallback's value is no success of the target
            } catch (CutShort cut) {
                log.addCutShort(target.requests());
                return cut.reason;
            } catch (Error fatal) {
                throw fatal;
            } catch (Throwable failed) {        // a failed call, whatever the library threw
                ok = false;
                ending = CallEnding.ofFailure(failed, callStartedNs);
            }
            List<long[]> sent = target.requests();
            log.add(ok, sent, ending);
            if (sent.isEmpty()) {
                Thread.yield();                 // rejected without a request (open breaker): let others run
            }
        }
    }

    /**
     * Calls as the protocol reports them; request-less calls in a row are run-length encoded when
     * they ended alike (ok, and the same CallEnding kind; their waits summed).
     */
    static final class CallLog {
        private final StringBuilder json = new StringBuilder("[");
        private boolean first = true;
        private Boolean pendingOk;          // a run of request-less calls not yet written
        private CallEnding pendingEnding;
        private long pendingRepeat;
        long successfulCalls;
        long requests;
        long calls;                         // calls added, a run-length encoded one counted once each

        /** A call cut short (protocol.py): failed, marked, never merged with others. */
        void addCutShort(List<long[]> sent) {
            calls++;
            requests += sent.size();
            flush();
            append("{\"ok\":false,\"requests\":" + requestsJson(sent) + ",\"cut_short\":true}");
        }

        private static String requestsJson(List<long[]> sent) {
            StringBuilder out = new StringBuilder("[");
            for (int i = 0; i < sent.size(); i++) {
                long[] r = sent.get(i);
                out.append(i == 0 ? "[" : ",[").append(r[0]).append(',').append(r[1]).append(',').append(r[2]).append(']');
            }
            return out.append(']').toString();
        }

        void add(boolean ok, List<long[]> sent, CallEnding ending) {
            calls++;
            requests += sent.size();
            if (ok) {
                successfulCalls++;
            }
            if (sent.isEmpty()) {
                if (pendingOk != null && pendingOk == ok && pendingEnding.sameKind(ending)) {
                    pendingRepeat++;
                    pendingEnding = pendingEnding.plusWait(ending);
                    return;
                }
                flush();
                pendingOk = ok;
                pendingEnding = ending;
                pendingRepeat = 1;
                return;
            }
            flush();
            append("{\"ok\":" + ok + ",\"requests\":" + requestsJson(sent) + ending.json() + "}");
        }

        private void flush() {
            if (pendingOk == null) {
                return;
            }
            append("{\"ok\":" + pendingOk + ",\"requests\":[]" + pendingEnding.json()
                    + (pendingRepeat > 1 ? ",\"repeat\":" + pendingRepeat : "") + "}");
            pendingOk = null;
        }

        private void append(String call) {
            json.append(first ? "" : ",").append(call);
            first = false;
        }

        String toJson() {
            flush();
            return json + "]";
        }
    }
}
