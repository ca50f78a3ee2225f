package kafkaharness.worker;

import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The bench's baseline (bench/bench_java_client.py): a bare Java producer loop, the same records
 * (decimal values, partition = value mod partitions) sent as fast as the client takes them, no
 * history, no pipe. Prints one JSON line: sent, acked, failed, seconds (until the last outcome).
 *
 * <p>Usage: {@code Worker --bare BOOTSTRAP TOPIC PARTITIONS SECONDS [key=value ...]}
 */
final class Bare {
    private Bare() {
    }

    static void main(String[] args) {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[1]);
        String topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        double seconds = Double.parseDouble(args[4]);
        for (int i = 5; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        long sent = 0;
        long began = System.nanoTime();
        long end = began + (long) (seconds * 1e9);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props, new ByteArraySerializer(),
                new ByteArraySerializer())) {
            while (System.nanoTime() < end) {
                producer.send(new ProducerRecord<>(topic, (int) (sent % partitions), null,
                        Long.toString(sent).getBytes(StandardCharsets.US_ASCII)), (md, e) -> {
                            if (e == null) {
                                acked.incrementAndGet();
                            } else {
                                failed.incrementAndGet();
                            }
                        });
                sent++;
            }
            producer.flush();
        }
        double elapsed = (System.nanoTime() - began) / 1e9;
        System.out.println("{\"sent\":" + sent + ",\"acked\":" + acked.get() + ",\"failed\":" + failed.get()
                + ",\"seconds\":" + elapsed + "}");
    }
}
