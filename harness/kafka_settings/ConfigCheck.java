// Checks settings against the ConfigDefs of the Kafka jars on the classpath: the broker's, the
// topic's (LogConfig), the Java producer's and consumer's. Used by harness/kafka_settings/jvm.py
// before a run starts, so a typo or a bad value is refused (exit 2) against the very version the
// run will start, not against a table of names that drifts from it.
//
//   java -cp 'LIBS/*:CLASSES' ConfigCheck SCOPE KEY=VALUE ... [-- SCOPE KEY=VALUE ...]
//
// Prints, per scope: "NAMES<TAB>scope<TAB>name,name,..." and one line per problem:
// "UNKNOWN<TAB>scope<TAB>key" or "INVALID<TAB>scope<TAB>key<TAB>Kafka's message". For the producer and
// consumer it then builds the client's whole config from the given settings (with placeholders
// for what the harness sets itself), which is where Kafka refuses contradictions such as
// enable.idempotence=true with acks=1: "REFUSED<TAB>scope<TAB><TAB>Kafka's message".
//
// Why reflection: the ConfigDef lives in different classes across the versions this harness
// starts (0.10.2 to 4.x: kafka.log.LogConfig's Scala object, then storage's LogConfig; KafkaConfig,
// then AbstractKafkaConfig.CONFIG_DEF), private in some. The largest ConfigDef held by the first
// class that exists is the one Kafka validates with.
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.*;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;

public class ConfigCheck {
    static final Map<String, String[]> HOMES = Map.of(
        "broker", new String[] {"org.apache.kafka.server.config.AbstractKafkaConfig", "kafka.server.KafkaConfig"},
        "topic", new String[] {"org.apache.kafka.storage.internals.log.LogConfig", "kafka.log.LogConfig"},
        "producer", new String[] {"org.apache.kafka.clients.producer.ProducerConfig"},
        "consumer", new String[] {"org.apache.kafka.clients.consumer.ConsumerConfig"});

    public static void main(String[] args) throws Exception {
        String scope = null;
        Map<String, Map<String, String>> given = new LinkedHashMap<>();
        for (String arg : args) {
            if (arg.equals("--")) { scope = null; continue; }
            if (scope == null) { scope = arg; given.put(scope, new LinkedHashMap<>()); continue; }
            int eq = arg.indexOf('=');
            given.get(scope).put(arg.substring(0, eq), arg.substring(eq + 1));
        }
        for (Map.Entry<String, Map<String, String>> e : given.entrySet()) check(e.getKey(), e.getValue());
        System.out.flush();
    }

    static void check(String scope, Map<String, String> settings) throws Exception {
        ConfigDef def = find(scope);
        if (def == null) { System.out.println("NODEF\t" + scope); return; }
        System.out.println("NAMES\t" + scope + "\t" + String.join(",", new TreeSet<>(def.names())));
        boolean clean = true;
        for (Map.Entry<String, String> s : settings.entrySet()) {
            ConfigDef.ConfigKey key = def.configKeys().get(s.getKey());
            if (key == null) { System.out.println("UNKNOWN\t" + scope + "\t" + s.getKey()); clean = false; continue; }
            try {
                Object parsed = ConfigDef.parseType(key.name, s.getValue(), key.type);
                if (key.validator != null) key.validator.ensureValid(key.name, parsed);
            } catch (ConfigException | IllegalArgumentException ex) {
                System.out.println("INVALID\t" + scope + "\t" + s.getKey() + "\t" + oneLine(ex.getMessage()));
                clean = false;
            }
        }
        if (clean && (scope.equals("producer") || scope.equals("consumer"))) whole(scope, settings);
    }

    /** Build the client's config the way the client does, so Kafka's own cross-checks run. */
    static void whole(String scope, Map<String, String> settings) {
        Map<String, Object> props = new HashMap<>(settings);
        props.putIfAbsent("bootstrap.servers", "127.0.0.1:9");
        String ser = "org.apache.kafka.common.serialization.ByteArray";
        try {
            if (scope.equals("producer")) {
                props.putIfAbsent("key.serializer", ser + "Serializer");
                props.putIfAbsent("value.serializer", ser + "Serializer");
                construct("org.apache.kafka.clients.producer.ProducerConfig", props);
            } else {
                props.putIfAbsent("key.deserializer", ser + "Deserializer");
                props.putIfAbsent("value.deserializer", ser + "Deserializer");
                props.putIfAbsent("group.id", "config-check");
                construct("org.apache.kafka.clients.consumer.ConsumerConfig", props);
            }
        } catch (java.lang.reflect.InvocationTargetException ex) {
            System.out.println("REFUSED\t" + scope + "\t\t" + oneLine(ex.getCause().getMessage()));
        } catch (ReflectiveOperationException ex) {
            System.out.println("NODEF\t" + scope + "\t\t" + oneLine(ex.toString()));
        }
    }

    /** The constructor is package-private before 0.11: reflection reaches it on every version. Then
     *  the client itself, made and closed at once (it connects to nothing before its first call):
     *  some rules live only in its constructor, e.g. KafkaProducer's delivery.timeout.ms >=
     *  linger.ms + request.timeout.ms, which refuses the short-timeout profile. */
    static void construct(String cls, Map<String, Object> props) throws ReflectiveOperationException {
        java.lang.reflect.Constructor<?> c = Class.forName(cls).getDeclaredConstructor(Map.class);
        c.setAccessible(true);
        c.newInstance(props);
        String client = cls.endsWith("ProducerConfig") ? "org.apache.kafka.clients.producer.KafkaProducer"
                                                       : "org.apache.kafka.clients.consumer.KafkaConsumer";
        Object made;
        try {
            made = Class.forName(client).getConstructor(Map.class).newInstance(props);
        } catch (java.lang.reflect.InvocationTargetException ex) {
            Throwable cause = ex.getCause();
            while (cause.getCause() != null) cause = cause.getCause();  // "Failed to construct kafka producer" -> why
            throw new java.lang.reflect.InvocationTargetException(cause);
        }
        try { ((AutoCloseable) made).close(); } catch (Exception ex) { /* closing a client that never connected */ }
    }

    static ConfigDef find(String scope) throws Exception {
        for (String name : HOMES.get(scope)) {
            ConfigDef best = null;
            for (String cls : new String[] {name, name + "$"}) {
                Class<?> c;
                try { c = Class.forName(cls); } catch (ClassNotFoundException | LinkageError ex) { continue; }
                Object module = null;
                try { module = c.getField("MODULE$").get(null); } catch (NoSuchFieldException ex) { /* not a Scala object */ }
                for (Field f : c.getDeclaredFields()) {
                    if (!ConfigDef.class.isAssignableFrom(f.getType())) continue;
                    boolean isStatic = Modifier.isStatic(f.getModifiers());
                    if (!isStatic && module == null) continue;
                    f.setAccessible(true);
                    ConfigDef d = (ConfigDef) f.get(isStatic ? null : module);
                    // The topic's own def (LogConfigDef) beside the server-level log defaults (4.x's SERVER_CONFIG_DEF).
                    if (scope.equals("topic") && !f.getType().getSimpleName().endsWith("LogConfigDef")) continue;
                    if (d != null && (best == null || d.names().size() > best.names().size())) best = d;
                }
            }
            if (best != null) return best;
        }
        return null;
    }

    static String oneLine(String s) { return s == null ? "" : s.replace('\n', ' ').replace('\t', ' '); }
}
