package kafkaharness.worker;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** A KafkaProducer behind the protocol: pipelined sends, transactions, its producer id and epoch. */
final class ProducerHandle extends Handle {
    private final Properties props;
    private final boolean reportPid;
    private KafkaProducer<byte[], byte[]> producer;
    private TxnState txn = TxnState.NONE; // the producer's TransactionManager, read by reflection
    private long lastPid = -1;
    private int lastEpoch = -1;
    private volatile Object lastToken; // the ProducerIdAndEpoch object last looked at (TxnState.pidEpochToken)
    // The feed: the queue workload's produce loop run here, recording into Out's rows.
    private volatile boolean feeding;
    private Thread feeder;
    private volatile long feedNext;
    private final AtomicLong feedPending = new AtomicLong();

    ProducerHandle(Worker worker, int h, Properties props, boolean reportPid) {
        super(worker, h, "producer");
        this.props = props;
        this.reportPid = reportPid;
    }

    @Override
    void open() {
        producer = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
        txn = TxnState.of(producer);
    }

    TxnState txn() {
        return txn;
    }

    @Override
    void request(String op, long id, JsonNode req) {
        switch (op) {
            case "init_transactions":
                submit(id, () -> {
                    producer.initTransactions();
                    checkPid();
                    return "";
                });
                return;
            case "begin_transaction":
                submit(id, () -> {
                    producer.beginTransaction();
                    return "";
                });
                return;
            case "send_offsets":
                submit(id, () -> {
                    sendOffsets(req);
                    return "";
                });
                return;
            case "commit_transaction":
                submit(id, () -> {
                    producer.commitTransaction();
                    checkPid();
                    return "";
                });
                return;
            case "abort_transaction":
                submit(id, () -> {
                    producer.abortTransaction();
                    checkPid();
                    return "";
                });
                return;
            case "feed":
                startFeed(id, req);
                return;
            case "feed_stop":
                submit(id, () -> {
                    feeding = false;
                    if (feeder != null) {
                        feeder.join();
                        feeder = null;
                    }
                    return "\"n\":" + feedNext + ",\"pending\":" + feedPending.get();
                });
                return;
            case "feed_flush":
                submit(id, () -> {
                    long until = System.nanoTime() + req.path("ms").asLong(0) * 1_000_000L;
                    while (feedPending.get() > 0 && System.nanoTime() < until) {
                        Thread.sleep(5);
                    }
                    return "\"pending\":" + feedPending.get();
                });
                return;
            case "purge":
                // Java's producer has no purge: a forced close fails every incomplete batch at once
                // (KafkaException "Producer is closed forcefully"), each an outcome Python records as
                // unknown, and returns only after its I/O thread ran those callbacks.
                submit(id, () -> {
                    closed = true;
                    producer.close(Duration.ZERO);
                    return "";
                });
                return;
            case "close":
                submit(id, () -> {
                    closed = true;
                    try {
                        producer.close(Duration.ZERO);
                    } finally {
                        shutdown();
                    }
                    return "";
                });
                return;
            default:
                worker.fail(id, new IllegalArgumentException("producer: unknown op " + op), this);
        }
    }

    /** Queue one send on this producer's thread (from the stdin thread: Worker.send). */
    void send(long s, String topic, int p, long v) {
        execute(() -> doSend(s, topic, p, v));
    }

    private void doSend(long s, String topic, int p, long v) {
        Outcome outcome = new Outcome(s);
        try {
            producer.send(new ProducerRecord<>(topic, p, null, Long.toString(v).getBytes(StandardCharsets.US_ASCII)),
                    outcome);
        } catch (Exception e) {
            // Thrown by send() itself: the record may still have been appended (KafkaProducer.doSend
            // adds the partition to the transaction after the append), so this is an outcome like
            // any other, classified by its name, never a proof that it was not written.
            outcome.onCompletion(null, e);
        }
    }

    /**
     * The feed (the queue workload's producer, workloads/loops.py Feed): producer w of W sends its
     * n-th value n * W + w to a partition drawn from its own seeded stream, `rate` a second (0: as
     * fast as the client takes them), until feed_stop. Each send's invoke is recorded as a row
     * before the send and its acknowledgement as a row when it comes; a failure is a line, which
     * Python classifies as it does the per-send path's. The history's rules are Python's; only
     * the loop and the rows' making moved here, because Python handling every send capped the
     * recorded rate at half a bare Java loop's (docs/settings.md).
     */
    private void startFeed(long id, JsonNode req) {
        if (feeder != null) {
            worker.fail(id, new IllegalStateException("producer " + h + " is feeding already"), this);
            return;
        }
        int process = req.path("process").asInt();
        String topic = req.path("t").asText();
        int w = req.path("w").asInt();
        int producers = req.path("W").asInt(1);
        int partitions = req.path("P").asInt(1);
        double rate = req.path("rate").asDouble(0);
        long seed = req.path("seed").asLong(0);
        long n0 = req.path("n").asLong(0);
        feeding = true;
        feedNext = n0;
        feeder = new Thread(() -> feed(process, topic, w, producers, partitions, rate, seed, n0), "feed-" + h);
        feeder.setDaemon(true);
        feeder.start();
        worker.ok(id, "");
    }

    private void feed(int process, String topic, int w, int producers, int partitions, double rate, long seed, long n0) {
        SplittableRandom rng = new SplittableRandom(seed * 1_000_003L + w);
        Out out = worker.out;
        long began = System.nanoTime();
        long n = n0;
        long sent = 0;
        try {
            while (feeding && !closed) {
                long due = rate > 0 ? (long) ((System.nanoTime() - began) / 1e9 * rate) - sent : 2000;
                if (due <= 0) {
                    LockSupport.parkNanos(Math.min(5_000_000L, (long) (1e9 / rate)));
                    continue;
                }
                for (long i = Math.min(due, 2000); i > 0 && feeding; i--) {
                    int p = rng.nextInt(partitions);
                    long v = n * producers + w;
                    out.row(h, Out.INVOKE, System.nanoTime(), process, p, v, -1, -1);
                    feedPending.incrementAndGet();
                    FeedOutcome outcome = new FeedOutcome(process, p, v);
                    try {
                        producer.send(new ProducerRecord<>(topic, p, null,
                                Long.toString(v).getBytes(StandardCharsets.US_ASCII)), outcome);
                    } catch (Exception e) {
                        outcome.onCompletion(null, e); // as doSend: an outcome like any other
                    }
                    n++;
                    sent++;
                }
            }
        } finally {
            feedNext = n;
        }
    }

    private void sendOffsets(JsonNode req) throws Exception {
        ConsumerHandle consumer = (ConsumerHandle) worker.handle(req.path("c").asInt(-1));
        if (consumer == null) {
            throw new IllegalStateException("no open consumer with handle " + req.path("c"));
        }
        String topic = req.path("t").asText();
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        Iterator<Map.Entry<String, JsonNode>> it = req.path("offsets").fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            offsets.put(new TopicPartition(topic, Integer.parseInt(e.getKey())), new OffsetAndMetadata(e.getValue().asLong()));
        }
        // The consumer's group metadata is read on the consumer's own thread (it is not thread-safe).
        ConsumerGroupMetadata group = consumer.await(consumer::groupMetadata, 60_000);
        producer.sendOffsetsToTransaction(offsets, group);
    }

    /** Tell Python the producer id and epoch when they change (idempotent producers only). */
    private void checkPid() {
        if (!reportPid) {
            return;
        }
        // Every acknowledgement looks, on the producer's I/O thread: the look is one field read and
        // a comparison by identity, and the id and epoch are read only when their object changed.
        // Read through the getter each time, the look was a third of the I/O thread's samples in
        // the feed (JFR, 2026-11-26).
        Object token = txn.pidEpochToken();
        if (token != null && token == lastToken) {
            return;
        }
        long[] seen = txn.producerIdAndEpoch();
        lastToken = token; // read before the id: a change between the two reads is seen at the next look
        if (seen == null || seen[0] < 0) {
            return;
        }
        synchronized (this) {
            if (seen[0] == lastPid && seen[1] == lastEpoch) {
                return;
            }
            lastPid = seen[0];
            lastEpoch = (int) seen[1];
        }
        worker.out.line("{\"ev\":\"pid\",\"h\":" + h + ",\"pid\":" + seen[0] + ",\"epoch\":" + seen[1] + "}");
    }

    /** A fed send's outcome: a row when written, a line when not; once (send() may throw after the
     *  append, and the client then calls back as well). */
    private final class FeedOutcome implements Callback {
        private final int process;
        private final int p;
        private final long v;
        private final AtomicBoolean done = new AtomicBoolean();

        FeedOutcome(int process, int p, long v) {
            this.process = process;
            this.p = p;
            this.v = v;
        }

        @Override
        public void onCompletion(RecordMetadata md, Exception e) {
            if (!done.compareAndSet(false, true)) {
                return;
            }
            if (e == null) {
                worker.out.row(h, Out.OK, System.nanoTime(), process, p, v, md.offset(), -1);
            } else {
                worker.out.line("{\"ev\":\"feedfail\",\"h\":" + h + ",\"k\":" + p + ",\"v\":" + v + ",\"err\":"
                        + Failure.json(e, ProducerHandle.this) + "}");
            }
            feedPending.decrementAndGet();
            checkPid();
        }
    }

    /** One send's delivery outcome, on the producer's I/O thread (or on this thread if send threw). */
    private final class Outcome implements Callback {
        private final long s;

        Outcome(long s) {
            this.s = s;
        }

        @Override
        public void onCompletion(RecordMetadata md, Exception e) {
            if (e == null) {
                // the common outcome, as the cheapest line to parse: "+H S OFFSET" (not JSON)
                worker.out.line("+" + h + " " + s + " " + md.offset());
            } else {
                worker.out.line("{\"h\":" + h + ",\"s\":" + s + ",\"err\":" + Failure.json(e, ProducerHandle.this) + "}");
            }
            checkPid(); // an epoch bump shows before the outcomes of the batches sent under it
        }
    }
}
