package kafkaharness.worker;

/** Placeholder for the bench's bare producer loop (bench/bench_java_client.py). */
final class Bare {
    private Bare() {
    }

    static void main(String[] args) {
        System.err.println("--bare: not built yet");
        System.exit(2);
    }
}
