package dev.rbl.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The service's HTTP/1.1 front end, bounded as protocol.py says: request headers up to
 * MAX_HEADER_BYTES, bodies up to MAX_BODY_BYTES with a valid Content-Length, each request read
 * within READ_TIMEOUT_MS, at most maxJobs connections served at once (the next ones get 503).
 */
final class HttpFront {
    static final int MAX_BODY_BYTES = 1 << 20;
    static final int MAX_HEADER_BYTES = 32 * 1024;
    static final int READ_TIMEOUT_MS = 5000;
    private static final int REFUSE_LINGER_MS = 250;      // a refused connection waits this long at most for the close
    private static final Pattern REQUEST_LINE = Pattern.compile("([A-Z]{1,20}) (/[!-~]*) HTTP/1\\.([01])");
    // a field value: visible characters, spaces, tabs and obs-text; a NUL or another control
    // character is refused (RFC 9110 5.5), as Node's parser does
    private static final Pattern HEADER = Pattern.compile(
            "([!#$%&'*+\\-.^_`|~0-9A-Za-z]+):[ \\t]*([\\t\\x20-\\x7e\\x80-\\xff]*?)[ \\t]*");

    /** What the service answers. */
    interface Routes {
        String health();

        /** GET /limits: the limits shared instances set themselves (clients/protocol.py). */
        String limits();

        Reply run(byte[] body, BooleanSupplier callerGone);

        /** POST /call: the job limited to one call. */
        Reply call(byte[] body, BooleanSupplier callerGone);
    }

    record Reply(int status, String json) {
    }

    private final ServerSocketChannel server;
    private final Routes routes;
    private final int maxJobs;
    private final Semaphore slots;
    private final ThreadPoolExecutor workers;
    private final Lingerer lingerer;

    HttpFront(InetSocketAddress address, int maxJobs, Routes routes) throws IOException {
        this.server = ServerSocketChannel.open();
        server.socket().setReuseAddress(true);
        // hundreds of virtual users connect at once; an overflowing backlog drops their SYNs, which
        // are retried only after a second or more
        server.bind(address, Math.max(1024, 2 * maxJobs));
        this.routes = routes;
        this.maxJobs = maxJobs;
        this.slots = new Semaphore(maxJobs);
        this.workers = pool(maxJobs, "rbl-vu");
        this.lingerer = new Lingerer(REFUSE_LINGER_MS);
    }

    private static ThreadPoolExecutor pool(int size, String name) {
        ThreadPoolExecutor pool = new ThreadPoolExecutor(size, size, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(),
                runnable -> {
                    Thread thread = new Thread(runnable, name);
                    thread.setDaemon(true);
                    return thread;
                });
        pool.allowCoreThreadTimeOut(true);
        return pool;
    }

    int port() {
        return server.socket().getLocalPort();
    }

    /** Accepts connections on a (non-daemon) thread of its own until the process ends. */
    void start() {
        Thread acceptor = new Thread(() -> {
            while (server.isOpen()) {
                try {
                    SocketChannel channel = server.accept();
                    if (slots.tryAcquire()) {
                        workers.execute(() -> serve(channel));
                    } else {
                        refuse(channel);
                    }
                } catch (IOException e) {
                    if (!server.isOpen()) {
                        return;
                    }
                }
            }
        }, "rbl-accept");
        acceptor.start();
    }

    void stop() {
        try {
            server.close();
        } catch (IOException ignored) {
            // stopping anyway
        }
    }

    private void serve(SocketChannel channel) {
        try {
            new Connection(channel).serve();
        } catch (RuntimeException | StackOverflowError e) {      // a bug must not drop the caller silently
            new Connection(channel).send(500, "{\"error\":" + Json.quote("internal error: " + e) + "}", true);
        } finally {
            close(channel);
            slots.release();
        }
    }

    /**
     * The 503, written by the accepting thread without waiting (a fresh connection's send buffer
     * holds it whole); then the lingerer closes the connection.
     */
    private void refuse(SocketChannel channel) {
        byte[] reply = Connection.replyBytes(503, "{\"error\":\"busy: this service runs at most " + maxJobs
                + " connections at once\"}", true, true);
        try {
            channel.configureBlocking(false);
            channel.write(ByteBuffer.wrap(reply));
            channel.shutdownOutput();
        } catch (IOException e) {
            close(channel);
            return;
        }
        lingerer.add(channel);
    }

    /**
     * Close after an error reply without losing it: closing with unread input resets the
     * connection, which can discard the reply before the caller reads it; so read until the
     * caller closes (or `millis` pass) first.
     */
    static void lingerClose(SocketChannel channel, int millis) {
        try {
            channel.shutdownOutput();
            InputStream in = channel.socket().getInputStream();
            byte[] sink = new byte[65536];
            long deadline = System.nanoTime() + millis * 1_000_000L;
            while (true) {
                long left = (deadline - System.nanoTime()) / 1_000_000L;
                if (left <= 0) {
                    break;
                }
                channel.socket().setSoTimeout((int) left);
                if (in.read(sink) < 0) {
                    break;
                }
                // discard
            }
        } catch (IOException ignored) {
            // closing anyway
        }
        close(channel);
    }

    private static void close(SocketChannel channel) {
        try {
            channel.close();
        } catch (IOException ignored) {
            // already gone
        }
    }

    /** A request that cannot be served: answered with `status` and the connection closed. */
    private static final class Reject extends Exception {
        final int status;

        Reject(int status, String message) {
            super(message, null, false, false);
            this.status = status;
        }
    }

    /** The caller closed the connection between requests: nothing to answer. */
    private static final class PeerGone extends Exception {
        PeerGone() {
            super(null, null, false, false);
        }
    }

    private record Request(String method, String path, Map<String, List<String>> headers, boolean keepAlive,
                           byte[] body) {
    }

    /** One caller's connection: requests in turn, each read within READ_TIMEOUT_MS. */
    private final class Connection {
        private final SocketChannel channel;
        private byte[] buffer = new byte[0];

        Connection(SocketChannel channel) {
            this.channel = channel;
        }

        void serve() {
            while (true) {
                Request request;
                try {
                    request = readRequest();
                } catch (PeerGone e) {
                    return;
                } catch (Reject e) {
                    send(e.status, "{\"error\":" + Json.quote(e.getMessage()) + "}", true);
                    lingerClose(channel, 1000);
                    return;
                }
                Reply reply = dispatch(request);
                // a reply to HEAD has no body (RFC 9110 9.3.2): one would be read as the next reply
                write(replyBytes(reply.status(), reply.json(), !request.keepAlive(), !request.method().equals("HEAD")));
                if (!request.keepAlive()) {
                    return;
                }
            }
        }

        // -- reading ---------------------------------------------------------------------------
        private int receive(long deadline, String what) throws Reject, PeerGone {
            long left = (deadline - System.nanoTime()) / 1_000_000L;
            if (left <= 0) {
                throw new Reject(408, "the request's " + what + " did not arrive within " + READ_TIMEOUT_MS / 1000 + " s");
            }
            byte[] chunk = new byte[65536];
            try {
                channel.socket().setSoTimeout((int) left);
                int n = channel.socket().getInputStream().read(chunk);
                if (n > 0) {
                    append(chunk, n);
                }
                return n;
            } catch (SocketTimeoutException e) {
                throw new Reject(408, "the request's " + what + " did not arrive within " + READ_TIMEOUT_MS / 1000 + " s");
            } catch (IOException e) {
                throw new PeerGone();
            }
        }

        private void append(byte[] chunk, int n) {
            byte[] grown = Arrays.copyOf(buffer, buffer.length + n);
            System.arraycopy(chunk, 0, grown, buffer.length, n);
            buffer = grown;
        }

        /** Where the header block ends: [end of headers, start of body], or null. */
        private int[] headEnd() {
            for (int i = 0; i < buffer.length; i++) {
                if (buffer[i] != '\n') {
                    continue;
                }
                int j = i + 1 < buffer.length && buffer[i + 1] == '\r' ? i + 2 : i + 1;
                if (j < buffer.length && buffer[j] == '\n') {
                    return new int[] {i > 0 && buffer[i - 1] == '\r' ? i - 1 : i, j + 1};
                }
            }
            return null;
        }

        private boolean blank() {
            for (byte b : buffer) {
                if (b != '\r' && b != '\n') {
                    return false;
                }
            }
            return true;
        }

        /** Drops empty lines before a request line (allowed by RFC 9112 2.2), so the blank line
         * found next is the one that ends the headers. */
        private void skipLeadingEmptyLines() {
            int start = 0;
            while (start < buffer.length && (buffer[start] == '\r' || buffer[start] == '\n')) {
                start++;
            }
            if (start > 0) {
                buffer = Arrays.copyOfRange(buffer, start, buffer.length);
            }
        }

        private String readHead() throws Reject, PeerGone {
            long deadline = System.nanoTime() + READ_TIMEOUT_MS * 1_000_000L;
            int[] end;
            skipLeadingEmptyLines();
            while ((end = headEnd()) == null) {
                if (buffer.length > MAX_HEADER_BYTES) {
                    throw new Reject(431, "the request's headers are over " + MAX_HEADER_BYTES + " bytes");
                }
                int n;
                try {
                    n = receive(deadline, "headers");
                } catch (Reject e) {
                    if (blank()) {
                        throw new PeerGone();       // an idle keep-alive connection: close it quietly
                    }
                    throw e;
                }
                if (n < 0) {
                    if (blank()) {
                        throw new PeerGone();
                    }
                    throw new Reject(400, "the connection closed inside the request's headers");
                }
                skipLeadingEmptyLines();
            }
            if (end[0] > MAX_HEADER_BYTES) {
                throw new Reject(431, "the request's headers are over " + MAX_HEADER_BYTES + " bytes");
            }
            String head = new String(buffer, 0, end[0], StandardCharsets.ISO_8859_1);
            buffer = Arrays.copyOfRange(buffer, end[1], buffer.length);
            return head;
        }

        private Request readRequest() throws Reject, PeerGone {
            String[] lines = readHead().replace("\r\n", "\n").split("\n", -1);
            Matcher first = REQUEST_LINE.matcher(lines[0]);
            if (!first.matches()) {
                throw new Reject(400, "bad request line " + shorten(lines[0]));
            }
            Map<String, List<String>> headers = new LinkedHashMap<>();
            for (int i = 1; i < lines.length; i++) {
                Matcher header = HEADER.matcher(lines[i]);
                if (!header.matches()) {
                    throw new Reject(400, "bad header line " + shorten(lines[i]));
                }
                headers.computeIfAbsent(header.group(1).toLowerCase(), k -> new ArrayList<>()).add(header.group(2));
            }
            String connection = String.join(",", headers.getOrDefault("connection", List.of())).toLowerCase();
            boolean keepAlive = first.group(3).equals("1") && !connection.contains("close");
            return new Request(first.group(1), first.group(2), headers, keepAlive, readBody(headers));
        }

        private byte[] readBody(Map<String, List<String>> headers) throws Reject, PeerGone {
            if (headers.containsKey("transfer-encoding")) {
                throw new Reject(411, "send the body with a Content-Length (no Transfer-Encoding)");
            }
            List<String> values = headers.getOrDefault("content-length", List.of("0"));
            if (new HashSet<>(values).size() != 1 || !values.get(0).matches("[0-9]{1,18}")) {
                throw new Reject(400, "bad Content-Length " + shorten(String.join(", ", values)));
            }
            long length = Long.parseLong(values.get(0));
            if (length > MAX_BODY_BYTES) {
                throw new Reject(413, "the body is over " + MAX_BODY_BYTES + " bytes");
            }
            String expect = String.join(",", headers.getOrDefault("expect", List.of())).toLowerCase();
            if (length > buffer.length && expect.contains("100-continue")) {
                write("HTTP/1.1 100 Continue\r\n\r\n".getBytes(StandardCharsets.ISO_8859_1));
            }
            long deadline = System.nanoTime() + READ_TIMEOUT_MS * 1_000_000L;
            while (buffer.length < length) {
                if (receive(deadline, "body") < 0) {
                    throw new Reject(400, "the body ended after " + buffer.length + " of " + length
                            + " bytes (Content-Length)");
                }
            }
            byte[] body = Arrays.copyOf(buffer, (int) length);
            buffer = Arrays.copyOfRange(buffer, (int) length, buffer.length);
            return body;
        }

        /** True once the caller closed its side (or the connection broke); reads without blocking. */
        boolean callerGone() {
            try {
                channel.configureBlocking(false);
                ByteBuffer chunk = ByteBuffer.allocate(4096);
                int n = channel.read(chunk);
                if (n > 0) {
                    append(chunk.array(), n);       // a pipelined request: keep it for later
                }
                return n < 0;
            } catch (IOException e) {
                return true;
            } finally {
                try {
                    channel.configureBlocking(true);
                } catch (IOException ignored) {
                    // the next read reports it
                }
            }
        }

        // -- answering -------------------------------------------------------------------------
        private Reply dispatch(Request request) {
            String path = request.path().split("\\?", 2)[0];
            String method = switch (path) {
                case "/health", "/limits" -> "GET";
                case "/run", "/call" -> "POST";
                default -> null;
            };
            if (method == null) {
                return new Reply(404, "{\"error\":" + Json.quote("no route " + shorten(path)) + "}");
            }
            if (!request.method().equals(method)) {
                return new Reply(405, "{\"error\":\"use " + method + " " + path + "\"}");
            }
            if (path.equals("/health")) {
                return new Reply(200, routes.health());
            }
            if (path.equals("/limits")) {
                return new Reply(200, routes.limits());
            }
            try {
                return path.equals("/run") ? routes.run(request.body(), this::callerGone)
                        : routes.call(request.body(), this::callerGone);
            } catch (JobError e) {
                return new Reply(400, "{\"error\":" + Json.quote(e.getMessage()) + "}");
            }
        }

        void send(int status, String json, boolean close) {
            write(replyBytes(status, json, close, true));
        }

        static byte[] replyBytes(int status, String json, boolean close, boolean withBody) {
            byte[] data = json.getBytes(StandardCharsets.UTF_8);
            String head = "HTTP/1.1 " + status + " " + phrase(status) + "\r\ncontent-type: application/json\r\n"
                    + "content-length: " + data.length + "\r\n" + (close ? "connection: close\r\n" : "") + "\r\n";
            byte[] headBytes = head.getBytes(StandardCharsets.ISO_8859_1);
            if (!withBody) {
                return headBytes;
            }
            byte[] all = Arrays.copyOf(headBytes, headBytes.length + data.length);
            System.arraycopy(data, 0, all, headBytes.length, data.length);
            return all;
        }

        private void write(byte[] data) {
            try {
                OutputStream out = channel.socket().getOutputStream();
                out.write(data);
                out.flush();
            } catch (IOException ignored) {
                // the caller left; nothing else to do
            }
        }
    }

    private static String shorten(String text) {
        String quoted = Json.quote(text.length() > 80 ? text.substring(0, 80) + "..." : text);
        return quoted;
    }

    private static String phrase(int status) {
        return switch (status) {
            case 200 -> "OK";
            case 400 -> "Bad Request";
            case 404 -> "Not Found";
            case 405 -> "Method Not Allowed";
            case 408 -> "Request Timeout";
            case 411 -> "Length Required";
            case 413 -> "Content Too Large";
            case 431 -> "Request Header Fields Too Large";
            case 503 -> "Service Unavailable";
            default -> "Error";
        };
    }
}
