package kafkaharness.worker;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.producer.KafkaProducer;

/**
 * What the Java producer knows but does not publish: its producer id and epoch, and whether its
 * transaction manager is in a fatal or an abortable error state.
 *
 * <p>How: reflection on KafkaProducer's private {@code transactionManager} field, then the
 * manager's {@code producerIdAndEpoch()}, {@code hasFatalError()} and {@code hasAbortableError()}
 * (present, package-private, from kafka-clients 2.5 through 4.4; the ProducerIdAndEpoch class
 * moved package in 4.x, so it is read by its public fields {@code producerId} and {@code epoch},
 * not by its type). Chosen over parsing the client's "ProducerId set to N with epoch E" log line
 * because it needs no log level and no parsing, and it sees every epoch bump. Guarded: if a
 * version renames any of it, the worker says so on stderr once and reports no id (the history
 * then lacks `producer` events, as with a non-idempotent producer), and the error flags fall back
 * to the exception's type.
 */
final class TxnState {
    static final TxnState NONE = new TxnState(null);
    private static volatile boolean warned;
    private static final Map<String, Method> METHODS = new ConcurrentHashMap<>(); // looked up once
    private static volatile Field PID;
    private static volatile Field EPOCH;

    // The manager's producerIdAndEpoch field, as a VarHandle: its value is immutable and replaced
    // on every change, so comparing it by identity tells whether the id or epoch changed. null
    // where a version lacks the field (then producerIdAndEpoch() is read every time, as before).
    private static final VarHandle PID_EPOCH = pidEpochHandle();

    private final Object manager; // null: not idempotent, or not readable

    private static VarHandle pidEpochHandle() {
        try {
            Class<?> tm = Class.forName("org.apache.kafka.clients.producer.internals.TransactionManager");
            Field f = tm.getDeclaredField("producerIdAndEpoch");
            return MethodHandles.privateLookupIn(tm, MethodHandles.lookup()).unreflectVarHandle(f);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    /** The object holding the producer id and epoch now, compared by identity; null if unknown. */
    Object pidEpochToken() {
        if (manager == null || PID_EPOCH == null) {
            return null;
        }
        try {
            return PID_EPOCH.getVolatile(manager);
        } catch (RuntimeException e) {
            return null;
        }
    }

    private TxnState(Object manager) {
        this.manager = manager;
    }

    static TxnState of(KafkaProducer<?, ?> producer) {
        try {
            Field f = KafkaProducer.class.getDeclaredField("transactionManager");
            f.setAccessible(true);
            return new TxnState(f.get(producer));
        } catch (ReflectiveOperationException | RuntimeException e) {
            warn(e);
            return NONE;
        }
    }

    /** {producer id, epoch}, or null when unknown. */
    long[] producerIdAndEpoch() {
        Object pe = call("producerIdAndEpoch");
        if (pe == null) {
            return null;
        }
        try {
            Field pid = PID;
            Field epoch = EPOCH;
            if (pid == null || pid.getDeclaringClass() != pe.getClass()) { // looked up once, not per outcome
                PID = pid = pe.getClass().getField("producerId");
                EPOCH = epoch = pe.getClass().getField("epoch");
            }
            return new long[] {pid.getLong(pe), epoch.getShort(pe)};
        } catch (ReflectiveOperationException | RuntimeException e) {
            warn(e);
            return null;
        }
    }

    boolean fatal() {
        return Boolean.TRUE.equals(call("hasFatalError"));
    }

    boolean abortable() {
        return Boolean.TRUE.equals(call("hasAbortableError"));
    }

    private Object call(String method) {
        if (manager == null) {
            return null;
        }
        try {
            Method m = METHODS.get(method);
            if (m == null) {
                m = manager.getClass().getDeclaredMethod(method);
                m.setAccessible(true);
                METHODS.put(method, m);
            }
            return m.invoke(manager);
        } catch (ReflectiveOperationException | RuntimeException e) {
            warn(e);
            return null;
        }
    }

    private static void warn(Exception e) {
        if (!warned) {
            warned = true;
            System.err.println("worker: cannot read the producer's transaction manager (" + e
                    + "); producer ids and error states are not reported");
        }
    }
}
