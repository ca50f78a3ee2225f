package kafkaharness.worker;

import java.io.BufferedWriter;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * Reply lines to stdout from one writer thread. Client threads (executors, the producers' I/O
 * threads running delivery callbacks) only enqueue, so a slow reader on the Python side never
 * blocks a Kafka I/O thread mid-callback. The writer flushes once the queue is empty: at a few
 * thousand outcomes a second one flush carries many lines.
 */
final class Out {
    private final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();

    void line(String s) {
        lines.add(s);
    }

    void start() {
        Thread writer = new Thread(this::drain, "worker-out");
        writer.setDaemon(true);
        writer.start();
    }

    private void drain() {
        Writer w = new BufferedWriter(
                new OutputStreamWriter(new FileOutputStream(FileDescriptor.out), StandardCharsets.UTF_8), 1 << 16);
        try {
            while (true) {
                String s = lines.take();
                do {
                    w.write(s);
                    w.write('\n');
                } while ((s = lines.poll()) != null);
                w.flush();
            }
        } catch (IOException | InterruptedException e) {
            // Python's end of the pipe is gone: nobody will read an outcome again.
            Runtime.getRuntime().halt(0);
        }
    }
}
