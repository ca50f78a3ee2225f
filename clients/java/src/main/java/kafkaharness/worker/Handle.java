package kafkaharness.worker;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * One client (producer or consumer) and the single thread that makes every call on it: Kafka's
 * consumer refuses calls from two threads at once, and one thread per client keeps each client's
 * requests in the order Python sent them.
 */
abstract class Handle {
    final Worker worker;
    final int h;
    private final ExecutorService thread;
    volatile boolean closed;

    Handle(Worker worker, int h, String kind) {
        this.worker = worker;
        this.h = h;
        this.thread = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, kind + "-" + h);
            t.setDaemon(true);
            return t;
        });
    }

    abstract void open();

    /** Run one request on this client's thread. */
    abstract void request(String op, long id, JsonNode req);

    /** Run `call` on this client's thread; reply with its fields, or with its exception. */
    void submit(long id, Callable<String> call) {
        thread.execute(() -> {
            try {
                worker.ok(id, call.call());
            } catch (Throwable e) {
                worker.fail(id, e, this);
            }
        });
    }

    void execute(Runnable task) {
        thread.execute(task);
    }

    /** Run `call` on this client's thread and wait for it (another client needs it: send_offsets). */
    <T> T await(Callable<T> call, long timeoutMs) throws Exception {
        Future<T> f = thread.submit(call);
        return f.get(timeoutMs, TimeUnit.MILLISECONDS);
    }

    /** Replies that a client closed: later requests for its handle are refused. */
    void shutdown() {
        closed = true;
        worker.closed(this);
        thread.shutdown();
    }
}
