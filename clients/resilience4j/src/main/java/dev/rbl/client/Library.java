package dev.rbl.client;

import java.io.IOException;
import java.io.InputStream;
import java.util.List;
import java.util.Map;
import java.util.Properties;

/**
 * A library this service runs (--library): its name and version as /health reports them, its
 * patterns, and how a job's step becomes a pattern instance.
 */
record Library(String name, String version, List<String> patterns, Builder builder) {
    interface Builder {
        Strategies.Decorator build(String pattern, Map<String, Object> values);
    }

    static final List<String> NAMES = List.of("resilience4j", Limiters.LIBRARY);

    /** The library called `name`, or null when this service has none of that name. */
    static Library named(String name) {
        return switch (name) {
            case "resilience4j" -> new Library(name, version("resilience4j.version"), Strategies.PATTERNS,
                    Strategies::build);
            case Limiters.LIBRARY -> new Library(name, version("concurrency-limits.version"), Limiters.PATTERNS,
                    Limiters::build);
            default -> null;
        };
    }

    /** A dependency's version, as Maven wrote it into rbl-client.properties at build time. */
    private static String version(String key) {
        Properties properties = new Properties();
        try (InputStream in = Library.class.getResourceAsStream("/rbl-client.properties")) {
            properties.load(in);
        } catch (IOException | NullPointerException e) {
            return "unknown";
        }
        return properties.getProperty(key, "unknown");
    }
}
