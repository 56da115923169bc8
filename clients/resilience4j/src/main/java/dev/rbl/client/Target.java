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
        final int status;

        RequestFailed(int status) {
            super("target answered " + status, null, false, false);
            this.status = status;
        }
    }

    private static final int TIMEOUT_MS = 60_000;

    /** A keep-alive connection to the target; a timeout on another thread may close it. */
    private static final class Connection {
        final Socket socket;
        InputStream in;
        OutputStream out;
        boolean reused;                 // from the pool, and it has not answered yet

        Connection(Socket socket, InputStream in, OutputStream out, boolean reused) {
            this.socket = socket;
            this.in = in;
            this.out = out;
            this.reused = reused;
        }
    }

    /** A request being sent, which a timeout may interrupt (interruptRequest). */
    private static final class Request {
        final long beginNs;
        Connection connection;          // guarded by the Target's lock: a stale pooled one is replaced
        boolean interrupted;            // guarded by the Target's lock: recorded by interruptRequest

        Request(long beginNs, Connection connection) {
            this.beginNs = beginNs;
            this.connection = connection;
        }
    }

    private final String host;
    private final int port;
    private final byte[] request;
    private final long startedNs;
    private final JobGuard guard;           // null for the warm-up
    private final TargetConnections pool;   // a /call's: the service's; null: a connection of its own
    // The job's thread and a timeout's workers share these: requests of a call never run at once,
    // but a timeout interrupts a request from another thread than the one sending it.
    private final Object lock = new Object();
    private Connection connection;          // guarded by lock
    private Request inFlight;               // guarded by lock
    private List<long[]> sent = new ArrayList<>();   // the call's requests, guarded by lock

    Target(String host, int port, String path, long startedNs, JobGuard guard) {
        this(host, port, path, startedNs, guard, null);
    }

    Target(String host, int port, String path, long startedNs, JobGuard guard, TargetConnections pool) {
        this.pool = pool;
        TargetConnections.Idle idle = pool == null ? null : pool.take();
        if (idle != null) {
            connection = new Connection(idle.socket(), idle.in(), idle.out(), true);
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

    /** A new call begins: its requests are recorded from here. */
    void newCall() {
        synchronized (lock) {
            sent = new ArrayList<>();
        }
    }

    /** The call's requests so far, [start_us, duration_us, status] each. */
    List<long[]> requests() {
        synchronized (lock) {
            return new ArrayList<>(sent);
        }
    }

    int requestCount() {
        synchronized (lock) {
            return sent.size();
        }
    }

    /** One request; returns null (the call's value) on a 2xx, else throws. */
    Object send() throws RequestFailed {
        int timeout = TIMEOUT_MS;
        if (guard != null) {
            guard.beforeRequest();
            // a request may take no longer than the job has left (plus a little, so it is seen to end)
            timeout = (int) Math.min(TIMEOUT_MS, guard.remainingMs() + 10);
        }
        Request request = begin();
        int status;
        try {
            status = exchange(request.connection, timeout);
        } catch (StaleConnection e) {
            // a pooled connection the target had closed while it was idle: the request never reached
            // it, so it goes again on a new connection (as Go's and Node's HTTP clients do)
            status = again(request, timeout);
        } catch (IOException | RuntimeException e) {
            drop(request.connection);
            status = 0;
        }
        if (!finish(request, status)) {
            status = 0;                         // a timeout interrupted it, and recorded it so
        }
        if (status == 0 && guard != null && guard.expired()) {
            throw new CutShort("max_duration");
        }
        if (status < 200 || status >= 300) {
            throw new RequestFailed(status);
        }
        return null;
    }

    /** Registers the request in flight on the job's connection (unconnected if new, so a timeout can close it). */
    private Request begin() {
        synchronized (lock) {
            if (TimedCall.abandoned()) {        // its timeout already ended the call: no request may follow
                throw new CutShort("abandoned");
            }
            inFlight = new Request(TimedCall.requestBegin(System.nanoTime()), connectionHeld());
            return inFlight;
        }
    }

    /** The request again on a new connection, unless a timeout interrupted it meanwhile. */
    private int again(Request request, int timeout) {
        Connection fresh;
        synchronized (lock) {
            drop(request.connection);
            if (request.interrupted) {
                return 0;
            }
            fresh = connectionHeld();
            request.connection = fresh;
        }
        try {
            return exchange(fresh, timeout);
        } catch (IOException | RuntimeException again) {
            drop(fresh);
            return 0;
        }
    }

    /** Records the request that ended; false when a timeout had interrupted (and recorded) it. */
    private boolean finish(Request request, int status) {
        long end = System.nanoTime();
        synchronized (lock) {
            if (request.interrupted) {
                return false;
            }
            sent.add(new long[] {(request.beginNs - startedNs) / 1000, (end - request.beginNs) / 1000, status});
            inFlight = null;
            return true;
        }
    }

    /**
     * A timeout cancelled the call (from another thread): its request in flight, if any, is recorded
     * now with status 0, and its connection closed, which ends the blocked read or connect at once.
     */
    void interruptRequest() {
        synchronized (lock) {
            if (inFlight == null) {
                return;
            }
            long end = System.nanoTime();
            sent.add(new long[] {(inFlight.beginNs - startedNs) / 1000, (end - inFlight.beginNs) / 1000, 0});
            inFlight.interrupted = true;
            drop(inFlight.connection);
            inFlight = null;
        }
    }

    /** The job's connection, a new unconnected one if it has none. Call holding lock. */
    private Connection connectionHeld() {
        if (connection == null) {
            Socket socket = new Socket();
            try {
                socket.setTcpNoDelay(true);
            } catch (IOException ignored) {
                // only a latency option; the connect reports a real problem
            }
            connection = new Connection(socket, null, null, false);
        }
        return connection;
    }

    /** The job is over: its connection closes, or, a /call's and open, goes back to the pool. */
    void release() {
        synchronized (lock) {
            Connection open = connection;
            if (pool != null && open != null && inFlight == null && open.socket.isConnected()
                    && !open.socket.isClosed()) {
                pool.give(open.socket, open.in, open.out);
                connection = null;
            }
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
        synchronized (lock) {
            if (connection != null) {
                drop(connection);
            }
        }
    }

    /** Closes `closing`, and forgets it if it is still the job's connection. */
    private void drop(Connection closing) {
        synchronized (lock) {
            TargetConnections.close(closing.socket);
            if (connection == closing) {
                connection = null;
            }
        }
    }

    private int exchange(Connection c, int timeout) throws IOException {
        Socket socket = c.socket;
        if (!socket.isConnected()) {
            socket.connect(new InetSocketAddress(host, port), timeout);
            c.in = new BufferedInputStream(socket.getInputStream(), 16 * 1024);
            c.out = new BufferedOutputStream(socket.getOutputStream(), 1024);
        }
        socket.setSoTimeout(timeout);
        InputStream in = c.in;
        boolean stale = c.reused;
        c.reused = false;
        try {
            c.out.write(request);
            c.out.flush();
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
        String statusLine = line(in);
        if (!statusLine.startsWith("HTTP/1.")) {
            throw new IOException("not an HTTP response: " + statusLine);
        }
        int status = Integer.parseInt(statusLine.substring(9, 12));
        long length = -1;
        boolean chunked = false;
        boolean close = statusLine.startsWith("HTTP/1.0");
        for (String header = line(in); !header.isEmpty(); header = line(in)) {
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
            for (long size = Long.parseLong(line(in).split(";")[0].trim(), 16); size > 0;
                 size = Long.parseLong(line(in).split(";")[0].trim(), 16)) {
                skip(in, size);
                line(in);
            }
            while (!line(in).isEmpty()) {
                // trailers
            }
        } else if (length >= 0) {
            skip(in, length);
        } else {
            in.transferTo(OutputStream.nullOutputStream());     // body ends when the server closes
            close = true;
        }
        if (close) {
            drop(c);
        }
        return status;
    }

    private static String line(InputStream in) throws IOException {
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

    private static void skip(InputStream in, long count) throws IOException {
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
