package kafkaharness.worker;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The Java client worker: one JVM per Python driver object (workloads/drivers/java.py), hosting
 * many producers and consumers by handle, because a JVM's start-up (~0.5 s) is too dear to pay
 * per client when the workloads replace clients under faults.
 *
 * <p>Protocol, JSON lines: one request per line on stdin, one reply per line on the protocol's
 * pipe (Out: its own file descriptor, so that nothing the JVM prints can cut it). A call
 * carries an {@code id} and gets exactly one reply with that id ({@code ok} fields or {@code err});
 * a send is the one request that is not JSON, {@code >H S P V TOPIC} (handle, sequence number,
 * partition, value, topic: most of the lines, parsed here without a JSON tree), and its delivery
 * outcome is a reply line
 * whenever the client knows it: {@code +H S OFFSET} when written (the one reply that is not JSON:
 * it is most of the lines, and Python splits it 4x faster than it parses JSON), or
 * {@code {"h":H,"s":S,"err":{...}}}.
 * Events without a request: {@code {"ev":"pid","h":H,"pid":..,"epoch":..}}.
 *
 * <p>Each client has its own single-thread executor (a KafkaConsumer is not thread-safe, and one
 * client's blocking call must not stall another's), so the requests of one client run in order.
 *
 * <p>The feed ({@code feed}, {@code feed_stop}, {@code feed_flush} on a producer: ProducerHandle)
 * runs the queue workload's produce loop here and records its sends as binary rows, framed as
 * {@code #R N} (Out): Python appends them to the history as they come.
 *
 * <p>The JVM halts as soon as stdin closes: Python closed the driver, or died (SIGKILL), and
 * nobody is left to read an outcome. The JVM never writes the history file; Python does, on one
 * clock: the feed's rows carry System.nanoTime(), which on Linux is the CLOCK_MONOTONIC that
 * Python's time.monotonic_ns() reads.
 */
public final class Worker {
    static final ObjectMapper JSON = new ObjectMapper();

    final Out out = new Out();
    private final Map<Integer, Handle> handles = new ConcurrentHashMap<>();
    private final AtomicInteger nextHandle = new AtomicInteger(1);

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("--bare")) {
            Bare.main(args);
            return;
        }
        // Nothing a library prints may reach the protocol, even where it is stdout (no pipe given).
        System.setOut(System.err);
        new Worker().serve();
    }

    private void serve() throws Exception {
        out.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            if (line.charAt(0) == '>') { // a send: ">H S P V TOPIC", most of the lines, parsed without JSON
                send(line);
                continue;
            }
            JsonNode req;
            try {
                req = JSON.readTree(line);
            } catch (Exception e) {
                System.err.println("worker: unreadable request line: " + line);
                continue;
            }
            dispatch(req);
        }
        // stdin closed: end now, whatever the clients hold (halt skips shutdown hooks and
        // non-daemon client threads that could keep the JVM alive for minutes).
        Runtime.getRuntime().halt(0);
    }

    private void dispatch(JsonNode req) {
        String op = req.path("op").asText();
        long id = req.path("id").asLong(-1);
        switch (op) {
            case "hello":
                out.line("{\"id\":" + id + ",\"kafka_clients\":" + JSON.valueToTree(clientVersion())
                        + ",\"java\":" + JSON.valueToTree(System.getProperty("java.version")) + "}");
                return;
            case "producer":
            case "consumer": {
                int h = nextHandle.getAndIncrement();
                Properties props = properties(req.path("config"));
                Handle handle = op.equals("producer")
                        ? new ProducerHandle(this, h, props, req.path("pid").asBoolean(false))
                        : new ConsumerHandle(this, h, props, req.path("eof").asBoolean(true));
                handles.put(h, handle);
                handle.submit(id, () -> {
                    try {
                        handle.open();
                    } catch (RuntimeException e) {
                        handles.remove(h);
                        handle.shutdown();
                        throw e;
                    }
                    return "\"h\":" + h;
                });
                return;
            }
            default:
                Handle handle = handles.get(req.path("h").asInt(-1));
                if (handle == null) {
                    fail(id, new IllegalStateException("no open client with handle " + req.path("h")), null);
                    return;
                }
                handle.request(op, id, req);
        }
    }

    private void send(String line) {
        int a = line.indexOf(' ');
        int b = line.indexOf(' ', a + 1);
        int c = line.indexOf(' ', b + 1);
        int d = line.indexOf(' ', c + 1);
        int h = Integer.parseInt(line, 1, a, 10);
        long s = Long.parseLong(line, a + 1, b, 10);
        int p = Integer.parseInt(line, b + 1, c, 10);
        long v = Long.parseLong(line, c + 1, d, 10);
        String topic = line.substring(d + 1); // Kafka's topic names have no spaces: [a-zA-Z0-9._-]
        Handle handle = handles.get(h);
        if (handle instanceof ProducerHandle) {
            ((ProducerHandle) handle).send(s, topic, p, v);
        } else {
            out.line("{\"h\":" + h + ",\"s\":" + s + ",\"err\":"
                    + Failure.json(new IllegalStateException("no open producer with handle " + h), null) + "}");
        }
    }

    Handle handle(int h) {
        return handles.get(h);
    }

    void closed(Handle handle) {
        handles.remove(handle.h);
    }

    /** A call's successful reply; `fields` are JSON members ("" for none). */
    void ok(long id, String fields) {
        out.line(fields == null || fields.isEmpty() ? "{\"id\":" + id + "}" : "{\"id\":" + id + "," + fields + "}");
    }

    void fail(long id, Throwable e, Handle handle) {
        out.line("{\"id\":" + id + ",\"err\":" + Failure.json(e, handle) + "}");
    }

    /** kafka-clients' own version, from the resource every release ships (AppInfoParser moved
     *  package in 4.4, so the class is not a stable way to ask). */
    static String clientVersion() {
        try (java.io.InputStream in = Worker.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "unknown");
        } catch (java.io.IOException e) {
            return "unknown";
        }
    }

    /** Kafka's client settings as given by Python: strings, numbers and booleans as their text. */
    static Properties properties(JsonNode config) {
        Properties props = new Properties();
        Iterator<Map.Entry<String, JsonNode>> fields = config.fields();
        while (fields.hasNext()) {
            Map.Entry<String, JsonNode> f = fields.next();
            JsonNode v = f.getValue();
            if (!v.isNull()) {
                props.put(f.getKey(), v.isValueNode() ? v.asText() : v.toString());
            }
        }
        return props;
    }
}
