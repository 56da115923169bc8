package dev.rbl.client;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.function.BooleanSupplier;

/**
 * rbl's JVM client service: rbl client protocol v1 (clients/protocol.py), over Resilience4j or Netflix
 * concurrency-limits. Usage: java -jar rbl-client-resilience4j.jar [--library NAME] --target HOST:PORT
 * [--listen HOST:PORT] [--max-jobs N] (library default resilience4j; listen default 127.0.0.1:0;
 * --target is the only address jobs may send requests to); prints `listening PORT` once bound.
 */
public final class Main {
    static final int MAX_JOBS = 512;
    private static final String USAGE =
            "usage: java -jar rbl-client-resilience4j.jar [--library " + String.join("|", Library.NAMES)
                    + "] --target HOST:PORT [--listen HOST:PORT] [--max-jobs N]";

    private Main() {
    }

    public static void main(String[] args) throws IOException {
        // The JDK HTTP server writes a reply's head and body separately; without TCP_NODELAY, Nagle
        // holds the body until the caller's delayed ACK (about 40 ms per request on Linux), which
        // made the 300 warm-up requests take 13 s. ServerConfig reads this once, before the first
        // server is created, so it is set first.
        System.setProperty("sun.net.httpserver.nodelay", "true");
        String listen = "127.0.0.1:0";
        String target = null;
        String libraryName = "resilience4j";
        int maxJobs = MAX_JOBS;
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--listen" -> listen = args[++i];
                    case "--target" -> target = args[++i];
                    case "--library" -> libraryName = args[++i];
                    case "--max-jobs" -> maxJobs = Integer.parseInt(args[++i]);
                    default -> throw new IllegalArgumentException(args[i]);
                }
            }
        } catch (RuntimeException e) {
            fail(USAGE);
        }
        if (target == null || maxJobs < 1) {
            fail(USAGE);
        }
        Library library = Library.named(libraryName);
        if (library == null) {
            fail("--library must be one of " + String.join(", ", Library.NAMES) + ", got " + libraryName);
        }
        Job.Address allowed = null;
        try {
            allowed = Job.Address.parse(target);
        } catch (IllegalArgumentException e) {
            fail("--target must be HOST:PORT, got " + target);
        }
        int colon = listen.lastIndexOf(':');
        String host = colon > 0 ? listen.substring(0, colon) : "127.0.0.1";
        int port = Integer.parseInt(listen.substring(colon + 1));

        ClientService service = new ClientService(library);
        Job.Address only = allowed;
        HttpFront front = new HttpFront(new InetSocketAddress(host, port), maxJobs, new HttpFront.Routes() {
            @Override
            public String health() {
                return service.health();
            }

            @Override
            public String limits() {
                return service.limits();
            }

            @Override
            public HttpFront.Reply run(byte[] body, BooleanSupplier callerGone) {
                Job job = Job.parse(Json.parse(utf8(body)), only);
                return new HttpFront.Reply(200, service.run(job, callerGone));
            }

            @Override
            public HttpFront.Reply call(byte[] body, BooleanSupplier callerGone) {
                Job job = Job.parse(Json.parse(utf8(body)), only);
                return new HttpFront.Reply(200, service.run(job, callerGone, 1));
            }
        });
        front.start();
        Runtime.getRuntime().addShutdownHook(new Thread(front::stop));
        String self = host.equals("0.0.0.0") ? "127.0.0.1" : host;
        Target.warmUp(URI.create("http://" + self + ":" + front.port() + "/health"));
        warmUpJobs(service, self, front.port());
        System.out.println("listening " + front.port());
        System.out.flush();
    }

    /**
     * Runs a few jobs of every pattern against this service's own /health before `listening`, as a
     * POST /run would (JSON, job checks, the library's decorators, reply): without it the first
     * jobs paid 0.1-0.5 s of class loading and JIT compilation, measured as time on the target.
     */
    static void warmUpJobs(ClientService service, String host, int port) {
        Job.Address self = new Job.Address(host, port);
        List<String> strategies = service.library.name().equals("resilience4j") ? List.of(
            "[]",
            "[{\"pattern\":\"retry\",\"params\":{\"maxAttempts\":2,\"intervalFunction\":\"FIXED\","
                    + "\"waitDuration\":1}}]",
            "[{\"pattern\":\"circuit_breaker\",\"params\":{\"slidingWindowSize\":10,\"minimumNumberOfCalls\":10}}]",
            "[{\"pattern\":\"fallback\"},{\"pattern\":\"timeout\",\"params\":{\"timeoutDuration\":1000}},"
                    + "{\"pattern\":\"bulkhead\",\"params\":{\"maxWaitDuration\":10}},"
                    + "{\"pattern\":\"rate_limiter\",\"params\":{\"limitForPeriod\":1000}}]")
            : service.library.patterns().stream().map(p -> "[{\"pattern\":\"" + p + "\"}]").toList();
        String authority = host.contains(":") ? "[" + host + "]" : host;
        for (int round = 0; round < 2; round++) {
            for (String strategy : strategies) {
                String body = "{\"strategy\":" + strategy + ",\"target_url\":\"http://" + authority + ":" + port
                        + "/health\",\"successes\":10,\"max_requests\":20,\"share\":\"user\","
                        + "\"instance\":\"warm-up\",\"vu\":1}";
                try {
                    service.run(Job.parse(Json.parse(body), self), () -> false);
                } catch (RuntimeException e) {
                    return;                      // a warm-up that fails only leaves the service cold
                }
            }
        }
    }

    private static void fail(String message) {
        System.err.println(message);
        System.exit(2);
    }

    static String utf8(byte[] body) {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(body)).toString();
        } catch (CharacterCodingException e) {
            throw new JobError("the body is not UTF-8: " + e);
        }
    }
}
