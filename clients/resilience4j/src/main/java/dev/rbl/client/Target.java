package dev.rbl.client;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** One virtual user's view of the target: sends a request and records [start_us, duration_us, status]. */
final class Target {
    /** A request that did not get a 2xx (status 0: connection error): the call failed. */
    static final class RequestFailed extends Exception {
        RequestFailed(int status) {
            super("target answered " + status, null, false, false);
        }
    }

    // one client for all virtual users, as production code shares one (keep-alive pool per host)
    private static final HttpClient HTTP = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(10))
            .build();

    private final HttpRequest request;
    private final long startedNs;
    List<long[]> sent = new ArrayList<>();

    Target(URI url, long startedNs) {
        this.request = HttpRequest.newBuilder(url).timeout(Duration.ofSeconds(60)).GET().build();
        this.startedNs = startedNs;
    }

    /**
     * Exercises the HTTP client against this service's own /health before the first job, so the
     * first virtual users do not measure class loading and JIT compilation instead of the target.
     */
    static void warmUp(URI health) {
        Target target = new Target(health, System.nanoTime());
        for (int i = 0; i < 300; i++) {
            try {
                target.send();
            } catch (RequestFailed e) {
                return;
            }
        }
    }

    void send() throws RequestFailed {
        long begin = System.nanoTime();
        int status;
        try {
            status = HTTP.send(request, HttpResponse.BodyHandlers.discarding()).statusCode();
        } catch (IOException e) {
            status = 0;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            status = 0;
        }
        long end = System.nanoTime();
        sent.add(new long[] {(begin - startedNs) / 1000, (end - begin) / 1000, status});
        if (status < 200 || status >= 300) {
            throw new RequestFailed(status);
        }
    }
}
