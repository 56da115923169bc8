package dev.rbl.client;

import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A pattern's library-native parameters from the job, read with their types. Every parameter must
 * be read by the pattern's builder: one that is not is an error, so a parameter this client does
 * not map can never be ignored silently.
 */
final class Params {
    /** The largest duration (ms), factor and window a parameter may have, as rbl's catalogue bounds
     *  them (rbl/libraries/catalogue.py CEILINGS, prelude.rbl; tests/test_parameter_bounds.py checks
     *  they agree): far beyond any useful value; a window sizes what a breaker keeps in memory. */
    static final long MAX_MILLIS = 1_000_000_000L;
    static final double MAX_FACTOR = 1e9;
    static final int MAX_WINDOW = 100_000;

    private final String library;
    private final String pattern;
    private final Map<String, Object> values;
    private final Set<String> read = new HashSet<>();

    Params(String pattern, Map<String, Object> values) {
        this("resilience4j", pattern, values);
    }

    Params(String library, String pattern, Map<String, Object> values) {
        this.library = library;
        this.pattern = pattern;
        this.values = values;
    }

    long integer(String name, long fallback) {
        Object value = take(name);
        if (value == null) {
            return fallback;
        }
        if (!(value instanceof Long number)) {
            throw new JobError(pattern + " `" + name + "` must be an integer, got " + Job.shown(value));
        }
        if (number < 0) {
            throw new JobError(pattern + " `" + name + "` must not be negative, got " + number);
        }
        return number;
    }

    /** A count that Resilience4j takes as an int. */
    int count(String name, int fallback) {
        long value = integer(name, fallback);
        if (value > Integer.MAX_VALUE) {
            throw new JobError(pattern + " `" + name + "` must be at most " + Integer.MAX_VALUE + ", got " + value);
        }
        return (int) value;
    }

    /** A count that sizes a window Resilience4j allocates whole when it builds the breaker. */
    int window(String name, int fallback) {
        int value = count(name, fallback);
        if (value > MAX_WINDOW) {
            throw new JobError(pattern + " `" + name + "` must be at most " + MAX_WINDOW + ", got " + value);
        }
        return value;
    }

    /** A duration in milliseconds, at most MAX_MILLIS. */
    long millis(String name, long fallback) {
        long value = integer(name, fallback);
        if (value > MAX_MILLIS) {
            throw new JobError(pattern + " `" + name + "` must be at most " + MAX_MILLIS + " ms, got " + value);
        }
        return value;
    }

    /** A duration in nanoseconds, at most MAX_MILLIS ms. */
    long nanos(String name, long fallback) {
        long value = integer(name, fallback);
        if (value > MAX_MILLIS * 1_000_000L) {
            throw new JobError(pattern + " `" + name + "` must be at most " + MAX_MILLIS * 1_000_000L + " ns, got "
                    + value);
        }
        return value;
    }

    Long optionalInteger(String name) {
        return values.get(name) == null ? null : millis(name, 0);
    }

    /** A count within a window's bound, or null when not given. */
    Integer optionalWindow(String name) {
        return values.get(name) == null ? null : window(name, 0);
    }

    double number(String name, double fallback) {
        Object value = take(name);
        if (value == null) {
            return fallback;
        }
        if (!(value instanceof Number number)) {
            throw new JobError(pattern + " `" + name + "` must be a number, got " + Job.shown(value));
        }
        double result = number.doubleValue();
        if (!(result >= 0 && result <= MAX_FACTOR)) {
            throw new JobError(pattern + " `" + name + "` must be between 0 and " + MAX_FACTOR + ", got " + result);
        }
        return result;
    }

    boolean bool(String name, boolean fallback) {
        Object value = take(name);
        if (value == null) {
            return fallback;
        }
        if (!(value instanceof Boolean flag)) {
            throw new JobError(pattern + " `" + name + "` must be true or false, got " + Job.shown(value));
        }
        return flag;
    }

    String choice(String name, String fallback, List<String> allowed) {
        Object value = take(name);
        if (value == null) {
            return fallback;
        }
        if (!(value instanceof String text) || !allowed.contains(text)) {
            throw new JobError(pattern + " `" + name + "` must be one of " + String.join(", ", allowed) + ", got "
                    + Job.shown(value));
        }
        return text;
    }

    /** Call after reading every parameter the pattern knows. */
    void requireAllRead() {
        for (String name : values.keySet()) {
            if (!read.contains(name)) {
                throw new JobError(library + " " + pattern + " has no parameter `" + name + "`; it has "
                        + (read.isEmpty() ? "none" : String.join(", ", read)));
            }
        }
    }

    private Object take(String name) {
        read.add(name);
        return values.get(name);
    }
}
