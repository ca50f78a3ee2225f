package kafkaharness.worker;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.LongBuffer;
import java.util.concurrent.locks.LockSupport;

/**
 * One thread's feed rows (Out.java), on their way to the protocol's writer thread without a lock:
 * a ring with one writer (a feed thread for invokes, a producer's I/O thread for acknowledgements)
 * and one reader (Out's writer thread). The writer fills a row, then publishes it with a release
 * store of {@code head}; the reader takes rows up to an acquired {@code head} and frees them with a
 * release store of {@code tail}. On x86 both stores are plain moves.
 *
 * <p>Why (issue 35): every row went through one synchronized buffer shared by the feed thread and
 * the producer's I/O thread, two lock acquisitions a send on a monitor the two threads fought over,
 * and the JVM spent ~1.2 µs a send more than the bare loop (docs/settings.md).
 *
 * <p>A full ring makes its writer wait for the reader (backpressure, as a slow reader of the pipe
 * makes): the queue before it grew without bound.
 */
final class RowRing {
    static final int ROWS = 1 << 15; // 32,768 rows, 2 MB: ~55 ms of the fastest feed measured (600,000 rows/s)
    private static final VarHandle HEAD;
    private static final VarHandle TAIL;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            HEAD = l.findVarHandle(RowRing.class, "head", long.class);
            TAIL = l.findVarHandle(RowRing.class, "tail", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final int h;
    final boolean acks; // written by an I/O thread (acknowledgements), not by a feed thread (invokes)
    private final long[] buf = new long[ROWS * Out.ROW_LONGS];
    @SuppressWarnings("unused") private long head; // rows published (VarHandle HEAD)
    @SuppressWarnings("unused") private long tail; // rows taken by the reader (VarHandle TAIL)
    private long written; // the writer's own copy of head
    private long freeUpTo; // the writer's last look at tail + ROWS
    private long taken; // the reader's own copy of tail

    RowRing(int h, boolean acks) {
        this.h = h;
        this.acks = acks;
    }

    /** The writer thread's row (one writer only). */
    void row(long kind, long t, long process, long key, long value, long offset, long epoch) {
        long n = written;
        if (n == freeUpTo) {
            waitForRoom(n);
        }
        long[] r = buf;
        int i = (int) (n & (ROWS - 1)) * Out.ROW_LONGS;
        r[i] = h;
        r[i + 1] = kind;
        r[i + 2] = t;
        r[i + 3] = process;
        r[i + 4] = key;
        r[i + 5] = value;
        r[i + 6] = offset;
        r[i + 7] = epoch;
        written = n + 1;
        HEAD.setRelease(this, n + 1);
    }

    private void waitForRoom(long n) {
        long free;
        while ((free = (long) TAIL.getAcquire(this) + ROWS) == n) {
            LockSupport.parkNanos(50_000L);
        }
        freeUpTo = free;
    }

    /** The reader: the rows published now (read before another ring's, see Out.drainRings). */
    long published() {
        return (long) HEAD.getAcquire(this);
    }

    /** The reader: the first row not taken yet. */
    long taken() {
        return taken;
    }

    /** The reader: the time (System.nanoTime()) of row n, published and not freed. */
    long timeOf(long n) {
        return buf[(int) (n & (ROWS - 1)) * Out.ROW_LONGS + 2];
    }

    /** The reader: row n into `into`. */
    void copy(long n, LongBuffer into) {
        into.put(buf, (int) (n & (ROWS - 1)) * Out.ROW_LONGS, Out.ROW_LONGS);
    }

    /** The reader: the rows before n are taken, their room free for the writer. */
    void free(long n) {
        taken = n;
        TAIL.setRelease(this, n);
    }
}
