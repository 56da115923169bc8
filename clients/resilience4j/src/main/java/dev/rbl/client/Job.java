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
    static final int MAX_TARGET_PATH_CHARS = 2048;   // target_url's path and query: the compiler's MAX_TARGET_LENGTH
    static final int MAX_URL_CHARS = MAX_TARGET_PATH_CHARS + 512;   // room for http:// and any HOST:PORT besides
    // protocol v1's TARGET_URL (clients/protocol.py), the one rule every runtime applies:
    // http://HOST[:PORT] and a target path by the compiler's rule (rbl/compiler/urlpath.py)
    // (the path part is checked by targetPath(), a loop: java.util.regex recurses once per repetition
    // of an alternation, and a 2048-character path overflowed the stack)
    private static final Pattern URL = Pattern.compile(
            "http://([A-Za-z0-9.\\-]+|\\[[0-9A-Fa-f:.]+\\])(?::([0-9]{1,5}))?([/?#].*)?", Pattern.DOTALL);
    private static final String PATH_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~!$&'()*+,;=:/-";
    private static final String HEX = "0123456789ABCDEFabcdef";
    private static final Pattern AUTHORITY = Pattern.compile("([A-Za-z0-9.\\-]+|\\[[0-9A-Fa-f:.]+\\])(:[0-9]{1,5})?");

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
        // code points, as every runtime counts (length() counts UTF-16 units: an emoji is two)
        if (!(instance instanceof String key) || key.codePointCount(0, key.length()) > MAX_INSTANCE_CHARS) {
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
        if (url.codePointCount(0, url.length()) > MAX_URL_CHARS) {
            throw new JobError("`target_url` is longer than " + MAX_URL_CHARS + " characters");
        }
        Matcher m = URL.matcher(url);
        if (!m.matches() || m.group(3) != null && !targetPath(m.group(3))) {
            throw new JobError("`target_url` " + Json.quote(shown(url)) + " is not a URL this service can request: "
                    + urlProblem(url));
        }
        String path = m.group(3) == null ? "/" : m.group(3);
        if (path.length() > MAX_TARGET_PATH_CHARS) {
            throw new JobError("`target_url`'s path is " + path.length() + " characters long; at most "
                    + MAX_TARGET_PATH_CHARS);
        }
        int port = m.group(2) == null ? 80 : Integer.parseInt(m.group(2));
        if (port > 65535) {
            throw new JobError("`target_url` has a port out of range: " + port);
        }
        String host = Address.bare(m.group(1));
        // compared as written: brackets around a name or an IPv4 address ([127.0.0.1]) are no IPv6 literal
        String expected = allowed.host().contains(":") ? "[" + allowed.host() + "]" : allowed.host();
        if (!m.group(1).toLowerCase(Locale.ROOT).equals(expected) || port != allowed.port()) {
            throw new JobError("`target_url` must be on " + allowed.host() + ":" + allowed.port()
                    + " (this service's --target), got " + host + ":" + port);
        }
        return path;
    }

    /**
     * The compiler's TARGET_PATH (rbl/compiler/urlpath.py): `/` not followed by `/`, then path
     * characters and %XX escapes, and after a `?` query characters (the same and `?`).
     */
    static boolean targetPath(String path) {
        if (!path.startsWith("/") || path.startsWith("//")) {
            return false;
        }
        for (int i = 0; i < path.length(); i++) {
            char c = path.charAt(i);
            if (c == '%') {
                if (i + 2 >= path.length() || HEX.indexOf(path.charAt(i + 1)) < 0 || HEX.indexOf(path.charAt(i + 2)) < 0) {
                    return false;
                }
                i += 2;
            } else if (c != '?' && PATH_CHARS.indexOf(c) < 0) {   // `?` starts the query, and may appear in it
                return false;
            }
        }
        return true;
    }

    /** Why `url` does not match URL, for the error message. */
    private static String urlProblem(String url) {
        if (!url.startsWith("http://")) {
            return "it must be an http:// URL";
        }
        String rest = url.substring("http://".length());
        int cut = 0;
        while (cut < rest.length() && "/?#".indexOf(rest.charAt(cut)) < 0) {
            cut++;
        }
        String authority = rest.substring(0, cut);
        String path = rest.substring(cut);
        if (authority.contains("@")) {
            return "it must not have user info";
        }
        if (!AUTHORITY.matcher(authority).matches()) {
            return "it must be http://HOST:PORT/PATH with a host name or [IPv6] and a port of 1 to 5 digits";
        }
        if (!path.startsWith("/")) {
            return "its path must start with `/`";
        }
        if (path.startsWith("//")) {
            return "its path starts with `//`, which names a host";
        }
        if (Pattern.compile("%(?![0-9A-Fa-f]{2})").matcher(path).find()) {
            return "`%` does not start a %XX escape";
        }
        return "its path has a character a target path cannot hold (write it as %XX)";
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
