package kafkaharness.worker;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnknownServerException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.protocol.Errors;

/**
 * A Java exception as the protocol's ClientError: {name, msg, fatal, retriable, abort, cls}.
 *
 * <p>The name: a broker error's Kafka protocol name, {@code Errors.forException(e).name()}
 * (NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER: the names librdkafka gives broker errors too), and
 * for an exception no broker error maps to, the exception's simple class name (KafkaException,
 * IllegalStateException). TimeoutException keeps its class name although Errors maps it to
 * REQUEST_TIMED_OUT: the Java client raises it on its own (an expired delivery, max.block.ms),
 * which is not the broker's REQUEST_TIMED_OUT. Which name proves a failure is Python's table
 * (workloads/outcomes.py); this only names.
 */
final class Failure {
    private Failure() {
    }

    static String json(Throwable e, Handle handle) {
        Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        TxnState txn = handle instanceof ProducerHandle ? ((ProducerHandle) handle).txn() : TxnState.NONE;
        ObjectNode o = Worker.JSON.createObjectNode();
        o.put("name", name(t));
        o.put("msg", message(t));
        o.put("fatal", fatal(t, txn, handle));
        o.put("retriable", t instanceof RetriableException);
        o.put("abort", txn.abortable() || t.getClass().getSimpleName().equals("TransactionAbortableException"));
        o.put("cls", t.getClass().getName());
        return o.toString();
    }

    static String name(Throwable t) {
        if (t instanceof TimeoutException) {
            return t.getClass().getSimpleName();
        }
        if (t instanceof ApiException) {
            Errors err = Errors.forException(t);
            if (err != Errors.UNKNOWN_SERVER_ERROR || t instanceof UnknownServerException) {
                return err.name();
            }
        }
        return t.getClass().getSimpleName();
    }

    private static String message(Throwable t) {
        String msg = String.valueOf(t.getMessage());
        Throwable cause = t.getCause();
        if (cause != null && cause != t) { // e.g. KafkaException("... in an error state", ProducerFencedException)
            msg += " (caused by " + cause.getClass().getSimpleName() + ": " + cause.getMessage() + ")";
        }
        return msg;
    }

    /** The client is unusable from now on: the workloads replace it. */
    private static boolean fatal(Throwable t, TxnState txn, Handle handle) {
        if (handle != null && handle.closed) {
            return true;
        }
        Throwable root = t instanceof KafkaException && t.getCause() instanceof KafkaException ? t.getCause() : t;
        return txn.fatal() || root instanceof ProducerFencedException || root instanceof FencedInstanceIdException
                || root instanceof AuthenticationException || root instanceof AuthorizationException
                || root instanceof UnsupportedVersionException;
    }
}
