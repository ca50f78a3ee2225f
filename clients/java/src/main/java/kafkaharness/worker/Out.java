package kafkaharness.worker;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.LongBuffer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CopyOnWriteArrayList;
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
 * kind, System.nanoTime(), process, key, value, offset, epoch), each thread into a ring of its own
 * (RowRing, no lock). The writer takes them every IDLE_WAIT_MS, and before every line, merged
 * in time order, as frames: {@code #R N} and N rows of little-endian longs. Two orders hold:
 * <ul>
 * <li>an acknowledgement after its invoke: the writer reads the acknowledgement rings' heads
 * before the invoke rings'. A send's invoke was published before the send, so before its
 * acknowledgement could be, and every acknowledgement the writer sees has its invoke among the
 * rows it sees. Its invoke's time is no later (CLOCK_MONOTONIC, read before the send; a tie
 * goes to the invoke), so the merge writes the invoke first;</li>
 * <li>a line after every row recorded before it: a poll that returns a record is always written
 * after that record's invoke, so Python records the invoke first. The writer takes the rings after
 * it takes the line from the queue.</li>
 * </ul>
 * A row recorded after a line may now be written before it; no line's meaning depends on that.
 */
final class Out {
    static final int ROW_LONGS = 8;
    static final String PROTOCOL_PROPERTY = "kafkaharness.protocol";
    static final long INVOKE = 0, OK = 1; // harness/history/send_lines.py SEND_INVOKE, SEND_OK
    private static final int CHUNK_ROWS = 4096;
    private static final long IDLE_WAIT_MS = 2;

    private final LinkedBlockingQueue<Object> items = new LinkedBlockingQueue<>();
    private final CopyOnWriteArrayList<RowRing> rings = new CopyOnWriteArrayList<>();

    void line(String s) {
        items.add(s);
    }

    /** A ring for one thread's rows of handle h (acks: a producer's I/O thread's). */
    RowRing ring(int h, boolean acks) {
        RowRing r = new RowRing(h, acks);
        rings.add(r);
        return r;
    }

    /** A row from a thread that owns no ring (rare: see ProducerHandle.FeedOutcome): a frame of its own. */
    void row(int h, long kind, long t, long process, long key, long value, long offset, long epoch) {
        items.add(new long[] {h, kind, t, process, key, value, offset, epoch});
    }

    /** The ring's rows are written, then it is dropped (its writer wrote its last). */
    void retire(RowRing r) {
        items.add(r);
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
                boolean wrote = drainRings(os, bytes);
                if (o == null) {
                    if (wrote) {
                        os.flush();
                    }
                    continue;
                }
                while (o != null) { // every item taken from the queue after the rows before it
                    if (o instanceof RowRing) {
                        rings.remove(o);
                    } else {
                        write(os, bytes, o);
                    }
                    o = items.poll();
                    if (o != null) {
                        drainRings(os, bytes);
                    }
                }
                os.flush();
            }
        } catch (IOException | InterruptedException e) {
            // Python's end of the pipe is gone: nobody will read an outcome again.
            Runtime.getRuntime().halt(0);
        }
    }

    /**
     * Every ring's published rows, merged in time order (as one shared buffer kept them, in the
     * order its lock was taken; Python makes times non-decreasing in row order, so rows out of
     * order would be recorded later than they came), in frames of at most CHUNK_ROWS. Whether
     * anything was written.
     */
    private boolean drainRings(OutputStream os, ByteBuffer bytes) throws IOException {
        RowRing[] all = rings.toArray(new RowRing[0]);
        int k = all.length;
        if (k == 0) {
            return false;
        }
        long[] upTo = new long[k];
        long[] next = new long[k];
        for (int pass = 0; pass < 2; pass++) { // the acknowledgements' heads before the invokes'
            for (int i = 0; i < k; i++) {
                if (all[i].acks == (pass == 0)) {
                    upTo[i] = all[i].published();
                    next[i] = all[i].taken();
                }
            }
        }
        boolean wrote = false;
        LongBuffer longs = null;
        int n = 0;
        while (true) {
            int best = -1;
            long bestT = 0;
            for (int i = 0; i < k; i++) { // ties: the invoke (a send's acknowledgement never precedes it)
                if (next[i] < upTo[i]) {
                    long t = all[i].timeOf(next[i]);
                    if (best < 0 || t < bestT || (t == bestT && !all[i].acks && all[best].acks)) {
                        best = i;
                        bestT = t;
                    }
                }
            }
            if (best >= 0) {
                if (longs == null) {
                    bytes.clear();
                    longs = bytes.asLongBuffer();
                }
                all[best].copy(next[best]++, longs);
                n++;
            }
            if (n > 0 && (best < 0 || n == CHUNK_ROWS)) {
                os.write(("#R " + n + "\n").getBytes(StandardCharsets.US_ASCII));
                os.write(bytes.array(), 0, n * ROW_LONGS * 8);
                for (int i = 0; i < k; i++) {
                    all[i].free(next[i]);
                }
                wrote = true;
                longs = null;
                n = 0;
            }
            if (best < 0) {
                return wrote;
            }
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
