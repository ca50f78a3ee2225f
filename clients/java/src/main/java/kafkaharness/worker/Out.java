package kafkaharness.worker;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Reply lines, and the feed's history rows, to the protocol's pipe from one writer thread. The
 * pipe is its own file descriptor, named by the {@code kafkaharness.protocol} property (Python
 * passes {@code /proc/self/fd/N}), not stdout: the JVM itself prints to stdout where no Java code
 * can stop it (JFR's "Started recording", unified-logging warnings, agents), and one such line in
 * the middle of a frame of rows would cut the history. Without the property, stdout. Client threads
 * (executors, the producers' I/O threads running delivery callbacks, the feed) only enqueue, so a
 * slow reader on the Python side never blocks a Kafka I/O thread mid-callback. The writer flushes
 * once the queue is empty: at a few thousand outcomes a second one flush carries many lines.
 *
 * <p>Rows: a feed (ProducerHandle) records each send's invoke before it sends and its
 * acknowledgement when it comes, as ROW_LONGS longs (handle, then the history recorder's row:
 * kind, System.nanoTime(), process, key, value, offset, epoch). They gather in one buffer and
 * leave as a frame, {@code #R N} and N rows of little-endian longs, when the buffer is full, when
 * a line is enqueued, or when the writer finds nothing else to do. A line never overtakes a row
 * recorded before it: a poll that returns a record is always written after that record's invoke,
 * so Python records the invoke first.
 */
final class Out {
    static final int ROW_LONGS = 8;
    static final String PROTOCOL_PROPERTY = "kafkaharness.protocol";
    static final long INVOKE = 0, OK = 1; // harness/history/send_lines.py SEND_INVOKE, SEND_OK
    private static final int CHUNK_ROWS = 4096;
    private static final long IDLE_WAIT_MS = 2;

    private final LinkedBlockingQueue<Object> items = new LinkedBlockingQueue<>();
    private long[] rows = new long[CHUNK_ROWS * ROW_LONGS];
    private int filled; // longs in rows

    synchronized void line(String s) {
        handOver();
        items.add(s);
    }

    synchronized void row(int h, long kind, long t, long process, long key, long value, long offset, long epoch) {
        long[] r = rows;
        int i = filled;
        r[i] = h;
        r[i + 1] = kind;
        r[i + 2] = t;
        r[i + 3] = process;
        r[i + 4] = key;
        r[i + 5] = value;
        r[i + 6] = offset;
        r[i + 7] = epoch;
        filled = i + ROW_LONGS;
        if (filled == r.length) {
            handOver();
        }
    }

    /** The rows gathered so far become one queued frame (with this held). */
    private void handOver() {
        if (filled == 0) {
            return;
        }
        if (filled == rows.length) {
            items.add(rows);
            rows = new long[CHUNK_ROWS * ROW_LONGS];
        } else {
            items.add(Arrays.copyOf(rows, filled));
        }
        filled = 0;
    }

    void start() {
        Thread writer = new Thread(this::drain, "worker-out");
        writer.setDaemon(true);
        writer.start();
    }

    private void drain() {
        OutputStream os;
        try {
            String path = System.getProperty(PROTOCOL_PROPERTY);
            os = new BufferedOutputStream(path == null ? new FileOutputStream(FileDescriptor.out)
                    : new FileOutputStream(path), 1 << 16);
        } catch (IOException e) {
            System.err.println("worker-out: cannot open the protocol pipe: " + e);
            Runtime.getRuntime().halt(2);
            return;
        }
        ByteBuffer bytes = ByteBuffer.allocate(CHUNK_ROWS * ROW_LONGS * 8).order(ByteOrder.LITTLE_ENDIAN);
        try {
            while (true) {
                Object o = items.poll(IDLE_WAIT_MS, TimeUnit.MILLISECONDS);
                if (o == null) {
                    synchronized (this) {
                        handOver();
                    }
                    o = items.poll();
                    if (o == null) {
                        continue;
                    }
                }
                do {
                    write(os, bytes, o);
                } while ((o = items.poll()) != null);
                os.flush();
            }
        } catch (IOException | InterruptedException e) {
            // Python's end of the pipe is gone: nobody will read an outcome again.
            Runtime.getRuntime().halt(0);
        }
    }

    private static void write(OutputStream os, ByteBuffer bytes, Object o) throws IOException {
        if (o instanceof String) {
            os.write(((String) o).getBytes(StandardCharsets.UTF_8));
            os.write('\n');
            return;
        }
        long[] frame = (long[]) o;
        os.write(("#R " + frame.length / ROW_LONGS + "\n").getBytes(StandardCharsets.US_ASCII));
        bytes.clear();
        bytes.asLongBuffer().put(frame);
        os.write(bytes.array(), 0, frame.length * 8);
    }
}
