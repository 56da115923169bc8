package dev.rbl.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** One virtual user's job (rbl client protocol v1), checked as clients/python/job_request.py checks it. */
record Job(List<Step> strategy, Address target, String path, long successes, long maxRequests, String share,
           String instance, long vu, long maxDurationMs) {

    static final long MAX_COUNT = 1_000_000L;
    static final long MAX_DURATION_MS = 86_400_000L;
    static final int MAX_STEPS = 8;
    static final int MAX_INSTANCE_CHARS = 1024;
    static final int MAX_URL_CHARS = 2048;
    // RFC 3986 characters only; host (a name, or an IPv6 literal), optional port, path and query
    private static final Pattern URL = Pattern.compile(
            "http://(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9.\\-]+)(?::([0-9]{1,5}))?([/?][A-Za-z0-9\\-._~!$&'()*+,;=:@/?%]*)?");

    record Step(String pattern, Map<String, Object> params) {
    }

    /** The one host and port jobs may send requests to (--target). */
    record Address(String host, int port) {
        static Address parse(String text) {
            Matcher m = Pattern.compile("(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9.\\-]+):([0-9]{1,5})").matcher(text);
            if (!m.matches() || Integer.parseInt(m.group(2)) > 65535) {
                throw new IllegalArgumentException(text);
            }
            return new Address(bare(m.group(1)), Integer.parseInt(m.group(2)));
        }

        private static String bare(String host) {
            String lower = host.toLowerCase(Locale.ROOT);
            return lower.startsWith("[") ? lower.substring(1, lower.length() - 1) : lower;
        }
    }

    @SuppressWarnings("unchecked")
    static Job parse(Object body, Address allowed) {
        if (!(body instanceof Map<?, ?> map)) {
            throw new JobError("the job must be a JSON object");
        }
        Map<String, Object> job = (Map<String, Object>) map;
        List<Step> steps = strategy(job);
        Object target = job.get("target_url");
        if (!(target instanceof String url)) {
            throw new JobError("`target_url` must be str, got " + shown(target));
        }
        String path = path(url, allowed);
        Object share = job.get("share") == null ? "user" : job.get("share");
        if (!"user".equals(share) && !"client".equals(share)) {
            throw new JobError("`share` must be one of user, client, got " + shown(share));
        }
        long successes = bounded(job, "successes", 1, MAX_COUNT, null);
        long maxRequests = bounded(job, "max_requests", 1, MAX_COUNT, null);
        Object instance = job.get("instance") == null ? "" : job.get("instance");
        if (!(instance instanceof String key) || key.length() > MAX_INSTANCE_CHARS) {
            throw new JobError("`instance` must be a string of at most " + MAX_INSTANCE_CHARS + " characters");
        }
        long vu = bounded(job, "vu", 0, Integer.MAX_VALUE, 0L);
        long maxDuration = bounded(job, "max_duration_ms", 1, MAX_DURATION_MS, MAX_DURATION_MS);
        return new Job(steps, allowed, path, successes, maxRequests, (String) share, key, vu, maxDuration);
    }

    @SuppressWarnings("unchecked")
    private static List<Step> strategy(Map<String, Object> job) {
        Object strategy = job.get("strategy") == null ? List.of() : job.get("strategy");
        if (!(strategy instanceof List<?> items)) {
            throw new JobError("`strategy` must be list, got " + shown(strategy));
        }
        if (items.size() > MAX_STEPS) {
            throw new JobError("`strategy` has " + items.size() + " steps; at most " + MAX_STEPS);
        }
        List<Step> steps = new ArrayList<>();
        for (Object item : items) {
            if (!(item instanceof Map<?, ?> step) || !(step.get("pattern") instanceof String pattern)) {
                throw new JobError("each strategy step needs a `pattern` string");
            }
            Object params = step.get("params") == null ? Map.of() : step.get("params");
            if (!(params instanceof Map<?, ?>)) {
                throw new JobError("`params` must be an object");
            }
            steps.add(new Step(pattern, (Map<String, Object>) params));
        }
        return steps;
    }

    /** The request path of `url`, which must be http:// on the allowed host and port. */
    private static String path(String url, Address allowed) {
        if (url.length() > MAX_URL_CHARS) {
            throw new JobError("`target_url` is longer than " + MAX_URL_CHARS + " characters");
        }
        if (!url.startsWith("http://")) {
            throw new JobError("`target_url` must be an http:// URL, got " + shown(url));
        }
        Matcher m = URL.matcher(url);
        if (!m.matches()) {
            throw new JobError("`target_url` must be http://HOST:PORT/PATH with URL characters only, got " + shown(url));
        }
        int port = m.group(2) == null ? 80 : Integer.parseInt(m.group(2));
        if (port > 65535) {
            throw new JobError("`target_url` is not a URL: port " + port + " is out of range");
        }
        String host = Address.bare(m.group(1));
        if (!host.equals(allowed.host()) || port != allowed.port()) {
            throw new JobError("`target_url` must be on " + allowed.host() + ":" + allowed.port()
                    + " (this service's --target), got " + host + ":" + port);
        }
        String path = m.group(3) == null ? "/" : m.group(3);
        return path.startsWith("?") ? "/" + path : path;
    }

    private static long bounded(Map<String, Object> job, String key, long low, long high, Long fallback) {
        Object value = job.get(key) == null ? fallback : job.get(key);
        if (!(value instanceof Long number)) {
            throw new JobError("`" + key + "` must be int, got " + shown(value));
        }
        if (number < low || number > high) {
            throw new JobError("`" + key + "` must be between " + low + " and " + high + ", got " + number);
        }
        return number;
    }

    static String shown(Object value) {
        String text = String.valueOf(value);
        return text.length() > 60 ? text.substring(0, 60) + "..." : text;
    }
}
