package kafkaharness.worker;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A KafkaConsumer behind the protocol. Differences from librdkafka it hides:
 * - `consume(max)`: Java's poll returns up to max.poll.records; what exceeds `max` waits here
 *   and is returned by the next consume, before any new poll (so no rebalance falls between).
 * - EOF: Java has no EOF event; a partition is at its end when the last fetch's lag is 0
 *   (currentLag: high watermark, or LSO under read_committed), and its end is its position.
 * - assign: librdkafka's assign sets every partition's start anew; Java keeps the position of a
 *   partition already assigned, so assign first unassigns everything.
 */
final class ConsumerHandle extends Handle {
    private static final long NO_OFFSET = -1001; // librdkafka's OFFSET_INVALID: "no committed offset"

    private final Properties props;
    private final boolean reportEof;
    private KafkaConsumer<byte[], byte[]> consumer;
    private final ArrayDeque<ConsumerRecord<byte[], byte[]>> waiting = new ArrayDeque<>();
    private boolean rebalanced; // set inside poll by the listener, reported by the consume around it

    ConsumerHandle(Worker worker, int h, Properties props, boolean reportEof) {
        super(worker, h, "consumer");
        this.props = props;
        this.reportEof = reportEof;
    }

    @Override
    void open() {
        consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    ConsumerGroupMetadata groupMetadata() {
        return consumer.groupMetadata();
    }

    @Override
    void request(String op, long id, JsonNode req) {
        switch (op) {
            case "assign":
                submit(id, () -> {
                    List<TopicPartition> tps = partitions(req.path("t").asText(), req.path("parts"));
                    consumer.unsubscribe(); // Java's unassign: ends an assign or a subscription
                    waiting.clear();
                    consumer.assign(tps);
                    if (req.path("start").asText().equals("beginning")) {
                        consumer.seekToBeginning(tps);
                    } // committed: a newly assigned partition starts at its committed offset, else auto.offset.reset
                    return "";
                });
                return;
            case "unassign":
                submit(id, () -> {
                    consumer.unsubscribe(); // Java's unassign: ends an assign or a subscription
                    waiting.clear();
                    return "";
                });
                return;
            case "subscribe":
                submit(id, () -> {
                    waiting.clear();
                    consumer.subscribe(List.of(req.path("t").asText()), new Listener());
                    return "";
                });
                return;
            case "consume":
                submit(id, () -> consume(req.path("max").asInt(500), req.path("timeout_ms").asLong(100)));
                return;
            case "committed":
                submit(id, () -> {
                    Set<TopicPartition> tps = new HashSet<>(partitions(req.path("t").asText(), req.path("parts")));
                    Map<TopicPartition, OffsetAndMetadata> got = consumer.committed(tps, Duration.ofMillis(req.path("timeout_ms").asLong()));
                    StringBuilder b = new StringBuilder("\"offsets\":{");
                    String sep = "";
                    for (TopicPartition tp : tps) {
                        OffsetAndMetadata o = got.get(tp);
                        b.append(sep).append('"').append(tp.partition()).append("\":").append(o == null ? NO_OFFSET : o.offset());
                        sep = ",";
                    }
                    return b.append('}').toString();
                });
                return;
            case "high_watermark":
                submit(id, () -> {
                    TopicPartition tp = new TopicPartition(req.path("t").asText(), req.path("p").asInt());
                    Long end = consumer.endOffsets(List.of(tp), Duration.ofMillis(req.path("timeout_ms").asLong())).get(tp);
                    if (end == null) {
                        throw new IllegalStateException("no end offset for " + tp);
                    }
                    return "\"o\":" + end;
                });
                return;
            case "close":
                submit(id, () -> {
                    closed = true;
                    try {
                        consumer.close(Duration.ofMillis(req.path("timeout_ms").asLong(5000)));
                    } finally {
                        shutdown();
                    }
                    return "";
                });
                return;
            default:
                worker.fail(id, new IllegalArgumentException("consumer: unknown op " + op), this);
        }
    }

    private String consume(int max, long timeoutMs) {
        if (waiting.isEmpty()) {
            for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(timeoutMs))) {
                waiting.add(r);
            }
        }
        StringBuilder b = new StringBuilder("\"recs\":[");
        for (int n = 0; n < max && !waiting.isEmpty(); n++) {
            ConsumerRecord<byte[], byte[]> r = waiting.poll();
            long value = Long.parseLong(new String(r.value(), StandardCharsets.US_ASCII));
            int epoch = r.leaderEpoch().orElse(-1); // KIP-320: the leader epoch the record was written in
            b.append(n == 0 ? "[" : ",[").append(r.partition()).append(',').append(r.offset()).append(',')
                    .append(value).append(',').append(epoch).append(']');
        }
        b.append(']');
        if (rebalanced) {
            rebalanced = false;
            TreeSet<Integer> now = new TreeSet<>();
            for (TopicPartition tp : consumer.assignment()) {
                now.add(tp.partition());
            }
            b.append(",\"assigned\":").append(now);
        }
        if (reportEof) {
            b.append(",\"eof\":{").append(ends()).append('}');
        }
        return b.toString();
    }

    /** "p":position for each assigned partition read to its end (none of its records still waiting). */
    private String ends() {
        Set<Integer> pending = new HashSet<>();
        for (ConsumerRecord<byte[], byte[]> r : waiting) {
            pending.add(r.partition());
        }
        StringBuilder b = new StringBuilder();
        for (TopicPartition tp : consumer.assignment()) {
            if (pending.contains(tp.partition())) {
                continue;
            }
            OptionalLong lag = consumer.currentLag(tp);
            if (lag.isPresent() && lag.getAsLong() == 0) {
                b.append(b.length() == 0 ? "" : ",").append('"').append(tp.partition()).append("\":")
                        .append(consumer.position(tp));
            }
        }
        return b.toString();
    }

    private static List<TopicPartition> partitions(String topic, JsonNode parts) {
        List<TopicPartition> tps = new ArrayList<>();
        for (JsonNode p : parts) {
            tps.add(new TopicPartition(topic, p.asInt()));
        }
        return tps;
    }

    /**
     * Group rebalances, heard inside poll: the consume reply around it carries the whole assignment
     * after it (librdkafka's eager on_assign gives the whole assignment too). Any change counts, a
     * revocation alone included: the cooperative assignor and KIP-848's protocol take partitions
     * away without an eager reassignment. Nothing waits in `waiting` then: consume polls only once
     * every waiting record was returned.
     */
    private final class Listener implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            rebalanced |= !partitions.isEmpty();
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            rebalanced = true; // even when empty: a first join that got nothing is an assignment too
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            rebalanced |= !partitions.isEmpty();
        }
    }
}
