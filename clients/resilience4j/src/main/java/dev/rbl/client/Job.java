package dev.rbl.client;

import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** One virtual user's job (rbl client protocol v1, DESIGN 5.2), checked as protocol.py checks it. */
record Job(List<Step> strategy, URI targetUrl, long successes, long maxRequests, String share,
           String instance, long vu, Long maxDurationMs) {

    record Step(String pattern, Map<String, Object> params) {
    }

    @SuppressWarnings("unchecked")
    static Job parse(Object body) {
        if (!(body instanceof Map<?, ?> map)) {
            throw new JobError("the job must be a JSON object");
        }
        Map<String, Object> job = (Map<String, Object>) map;
        List<Step> steps = new ArrayList<>();
        Object strategy = job.getOrDefault("strategy", List.of());
        if (!(strategy instanceof List<?> items)) {
            throw new JobError("`strategy` must be list, got " + strategy);
        }
        for (Object item : items) {
            if (!(item instanceof Map<?, ?> step) || !(step.get("pattern") instanceof String pattern)) {
                throw new JobError("each strategy step needs a `pattern` string");
            }
            Object params = step.containsKey("params") ? step.get("params") : Map.of();
            if (!(params instanceof Map<?, ?>)) {
                throw new JobError("`params` must be an object");
            }
            steps.add(new Step(pattern, (Map<String, Object>) params));
        }
        Object target = job.get("target_url");
        if (!(target instanceof String url) || !url.startsWith("http://")) {
            throw new JobError("`target_url` must be an http:// URL, got " + target);
        }
        URI uri;
        try {
            uri = URI.create(url);
        } catch (IllegalArgumentException e) {
            throw new JobError("`target_url` is not a URL: " + e.getMessage());
        }
        Object share = job.getOrDefault("share", "user");
        if (!"user".equals(share) && !"client".equals(share)) {
            throw new JobError("`share` must be one of user, client, got " + share);
        }
        long successes = integer(job, "successes", null);
        long maxRequests = integer(job, "max_requests", null);
        if (successes < 1 || maxRequests < 1) {
            throw new JobError("`successes` and `max_requests` must be at least 1");
        }
        Long maxDuration = null;
        if (job.get("max_duration_ms") != null) {
            if (!(job.get("max_duration_ms") instanceof Long ms) || ms < 1) {
                throw new JobError("`max_duration_ms` must be a positive integer, got " + job.get("max_duration_ms"));
            }
            maxDuration = ms;
        }
        Object instance = job.get("instance");
        return new Job(steps, uri, successes, maxRequests, (String) share, instance == null ? "" : instance.toString(),
                integer(job, "vu", 0L), maxDuration);
    }

    private static long integer(Map<String, Object> job, String key, Long fallback) {
        Object value = job.containsKey(key) ? job.get(key) : fallback;
        if (!(value instanceof Long number)) {
            throw new JobError("`" + key + "` must be int, got " + value);
        }
        return number;
    }
}
