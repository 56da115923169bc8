package dev.rbl.client;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * One virtual user's view of the target: a keep-alive HTTP/1.1 connection of its own (as the
 * Python client has), sending GETs and recording [start_us, duration_us, status].
 *
 * A minimal client on a plain socket rather than java.net.http: bench/client_overhead.py measured
 * java.net.http adding about 260 us per request over a bare socket loop, which would be counted as
 * time on the target; this adds a few microseconds.
 */
final class Target {
    /** A request that did not get a 2xx (status 0: connection error): the call failed. */
    static final class RequestFailed extends Exception {
        RequestFailed(int status) {
            super("target answered " + status, null, false, false);
        }
    }

    private static final int TIMEOUT_MS = 60_000;

    private final String host;
    private final int port;
    private final byte[] request;
    private final long startedNs;
    private final JobGuard guard;           // null for the warm-up
    private final TargetConnections pool;   // a /call's: the service's; null: a connection of its own
    private Socket socket;
    private InputStream in;
    private OutputStream out;
    private boolean reused;                 // the connection came from the pool and has not answered yet
    List<long[]> sent = new ArrayList<>();

    Target(String host, int port, String path, long startedNs, JobGuard guard) {
        this(host, port, path, startedNs, guard, null);
    }

    Target(String host, int port, String path, long startedNs, JobGuard guard, TargetConnections pool) {
        this.pool = pool;
        TargetConnections.Idle idle = pool == null ? null : pool.take();
        if (idle != null) {
            socket = idle.socket();
            in = idle.in();
            out = idle.out();
            reused = true;
        }
        this.host = host;
        this.port = port;
        String authority = host.contains(":") ? "[" + host + "]" : host;
        this.request = ("GET " + path + " HTTP/1.1\r\nHost: " + authority + ":" + port + "\r\nAccept: */*\r\n\r\n")
                .getBytes(StandardCharsets.ISO_8859_1);
        this.startedNs = startedNs;
        this.guard = guard;
    }

    /**
     * Exercises this code against the service's own /health before the first job, so the first
     * virtual users do not measure class loading and JIT compilation instead of the target.
     */
    static void warmUp(URI health) {
        Target target = new Target(health.getHost(), health.getPort(), health.getRawPath(), System.nanoTime(), null);
        for (int i = 0; i < 300; i++) {
            try {
                target.send();
            } catch (RequestFailed e) {
                break;
            }
        }
        target.close();
    }

    void send() throws RequestFailed {
        int timeout = TIMEOUT_MS;
        if (guard != null) {
            guard.beforeRequest();
            // a request may take no longer than the job has left (plus a little, so it is seen to end)
            timeout = (int) Math.min(TIMEOUT_MS, guard.remainingMs() + 10);
        }
        long begin = System.nanoTime();
        int status;
        try {
            status = exchange(timeout);
        } catch (StaleConnection e) {
            // a pooled connection the target had closed while it was idle: the request never reached
            // it, so it goes again on a new connection (as Go's and Node's HTTP clients do)
            close();
            try {
                status = exchange(timeout);
            } catch (IOException | RuntimeException again) {
                close();
                status = 0;
            }
        } catch (IOException | RuntimeException e) {
            close();
            status = 0;
        }
        long end = System.nanoTime();
        sent.add(new long[] {(begin - startedNs) / 1000, (end - begin) / 1000, status});
        if (status == 0 && guard != null && guard.expired()) {
            throw new CutShort("max_duration");
        }
        if (status < 200 || status >= 300) {
            throw new RequestFailed(status);
        }
    }

    /** The job is over: its connection closes, or, a /call's and open, goes back to the pool. */
    void release() {
        if (pool != null && socket != null && !socket.isClosed()) {
            pool.give(socket, in, out);
            socket = null;
        }
        close();
    }

    /** A closed pooled connection found before any byte of its answer: the request may go again. */
    private static final class StaleConnection extends IOException {
        StaleConnection() {
            super("a pooled connection was closed by the target", null);
        }
    }

    void close() {
        reused = false;
        if (socket != null) {
            try {
                socket.close();
            } catch (IOException ignored) {
                // closing a broken connection: nothing left to do
            }
            socket = null;
        }
    }

    private int exchange(int timeout) throws IOException {
        if (socket == null) {
            socket = new Socket();
            socket.setTcpNoDelay(true);
            socket.connect(new InetSocketAddress(host, port), timeout);
            in = new BufferedInputStream(socket.getInputStream(), 16 * 1024);
            out = new BufferedOutputStream(socket.getOutputStream(), 1024);
        }
        socket.setSoTimeout(timeout);
        boolean stale = reused;
        reused = false;
        try {
            out.write(request);
            out.flush();
            in.mark(1);
            if (in.read() == -1) {
                throw new IOException("connection closed before the response");
            }
            in.reset();
        } catch (SocketTimeoutException e) {
            throw e;                        // the target is slow, not gone
        } catch (IOException e) {
            if (stale) {
                throw new StaleConnection();
            }
            throw e;
        }
        String statusLine = line();
        if (!statusLine.startsWith("HTTP/1.")) {
            throw new IOException("not an HTTP response: " + statusLine);
        }
        int status = Integer.parseInt(statusLine.substring(9, 12));
        long length = -1;
        boolean chunked = false;
        boolean close = statusLine.startsWith("HTTP/1.0");
        for (String header = line(); !header.isEmpty(); header = line()) {
            int colon = header.indexOf(':');
            if (colon < 0) {
                continue;
            }
            String name = header.substring(0, colon).trim().toLowerCase();
            String value = header.substring(colon + 1).trim().toLowerCase();
            switch (name) {
                case "content-length" -> length = Long.parseLong(value);
                case "transfer-encoding" -> chunked = value.contains("chunked");
                case "connection" -> close = value.contains("close") || (close && !value.contains("keep-alive"));
                default -> { }
            }
        }
        if (chunked) {
            for (long size = Long.parseLong(line().split(";")[0].trim(), 16); size > 0;
                 size = Long.parseLong(line().split(";")[0].trim(), 16)) {
                skip(size);
                line();
            }
            while (!line().isEmpty()) {
                // trailers
            }
        } else if (length >= 0) {
            skip(length);
        } else {
            in.transferTo(OutputStream.nullOutputStream());     // body ends when the server closes
            close = true;
        }
        if (close) {
            close();
        }
        return status;
    }

    private String line() throws IOException {
        StringBuilder text = new StringBuilder(64);
        for (int c = in.read(); c != '\n'; c = in.read()) {
            if (c == -1) {
                throw new IOException("connection closed mid-response");
            }
            if (c != '\r') {
                text.append((char) c);
            }
        }
        return text.toString();
    }

    private void skip(long count) throws IOException {
        long left = count;
        while (left > 0) {
            long skipped = in.skip(left);
            if (skipped <= 0) {
                if (in.read() == -1) {
                    throw new IOException("connection closed mid-body");
                }
                skipped = 1;
            }
            left -= skipped;
        }
    }
}
