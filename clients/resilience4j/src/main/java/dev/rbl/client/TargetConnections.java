package dev.rbl.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.util.ArrayDeque;
import java.util.Deque;

/**
 * Keep-alive connections to the target that /calls share, one call at a time each, as a production
 * client's pool: a connection per /call overflowed the target's listen queue at hundreds of calls a
 * second (a dropped SYN costs its request a second) and left a TIME_WAIT socket per call.
 */
final class TargetConnections {
    static final long IDLE_NS = 10_000_000_000L;     // an idle connection older than this is closed, not reused

    /** An open connection with its streams (their buffers hold nothing between requests). */
    record Idle(Socket socket, InputStream in, OutputStream out, long sinceNs) {
    }

    private final Deque<Idle> idle = new ArrayDeque<>();
    private final int kept;

    TargetConnections(int kept) {
        this.kept = kept;
    }

    /** The most recently used idle connection still young enough, or null. */
    Idle take() {
        while (true) {
            Idle connection;
            synchronized (idle) {
                connection = idle.pollLast();
            }
            if (connection == null) {
                return null;
            }
            if (System.nanoTime() - connection.sinceNs() < IDLE_NS && !connection.socket().isClosed()) {
                return connection;
            }
            close(connection.socket());
        }
    }

    void give(Socket socket, InputStream in, OutputStream out) {
        Idle extra = null;
        synchronized (idle) {
            idle.addLast(new Idle(socket, in, out, System.nanoTime()));
            if (idle.size() > kept) {
                extra = idle.pollFirst();
            }
        }
        if (extra != null) {
            close(extra.socket());
        }
    }

    static void close(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // closing a broken connection: nothing left to do
        }
    }
}
