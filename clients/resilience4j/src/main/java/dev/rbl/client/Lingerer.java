package dev.rbl.client;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * Closes refused connections without losing their 503, all on one thread: each closes when its
 * caller closes or lingerMs has passed (closing with unread input resets the connection, which can
 * discard the reply before the caller reads it). A pool of four threads each lingering over one
 * connection in turn made the callers beyond the cap wait seconds for their 503 when they kept
 * their connections open.
 */
final class Lingerer {
    private static final int MAX_LINGERING = 4096;     // beyond that the oldest closes at once

    private record Waiting(long deadlineNs, SocketChannel channel) {
    }

    private final long lingerNs;
    private final Selector selector;
    private final Queue<SocketChannel> added = new ConcurrentLinkedQueue<>();
    private final ArrayDeque<Waiting> waiting = new ArrayDeque<>();   // by deadline: all linger as long
    private final ByteBuffer sink = ByteBuffer.allocate(65536);

    Lingerer(int lingerMs) throws IOException {
        this.lingerNs = lingerMs * 1_000_000L;
        this.selector = Selector.open();
        Thread thread = new Thread(this::run, "rbl-linger");
        thread.setDaemon(true);
        thread.start();
    }

    /** Takes a connection whose reply is written and whose output is shut. */
    void add(SocketChannel channel) {
        added.add(channel);
        selector.wakeup();
    }

    private void run() {
        while (selector.isOpen()) {
            try {
                long timeoutMs = waiting.isEmpty() ? 0
                        : Math.max(1, (waiting.peekFirst().deadlineNs() - System.nanoTime()) / 1_000_000L + 1);
                selector.select(timeoutMs);
                for (SocketChannel channel; (channel = added.poll()) != null; ) {
                    try {
                        channel.register(selector, SelectionKey.OP_READ);
                        waiting.addLast(new Waiting(System.nanoTime() + lingerNs, channel));
                    } catch (ClosedChannelException e) {
                        close(channel);
                    }
                }
                for (SelectionKey key : selector.selectedKeys()) {
                    read((SocketChannel) key.channel());
                }
                selector.selectedKeys().clear();
                long now = System.nanoTime();
                while (!waiting.isEmpty() && (waiting.peekFirst().deadlineNs() <= now || waiting.size() > MAX_LINGERING)) {
                    close(waiting.pollFirst().channel());
                }
            } catch (IOException | RuntimeException e) {
                // one connection's trouble must not stop the others from closing
            }
        }
    }

    private void read(SocketChannel channel) {
        try {
            sink.clear();
            if (channel.read(sink) >= 0) {
                return;                                 // its request, read and dropped
            }
        } catch (IOException e) {
            // broken: close it
        }
        close(channel);                                 // the caller closed: so can we
    }

    private static void close(SocketChannel channel) {
        try {
            channel.close();                            // also cancels its key
        } catch (IOException ignored) {
            // already gone
        }
    }
}
