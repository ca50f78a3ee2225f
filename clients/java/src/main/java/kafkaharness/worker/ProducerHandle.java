package kafkaharness.worker;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
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
        long[] seen = txn.producerIdAndEpoch();
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
