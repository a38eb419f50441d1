package exactq.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Reads one partition from its first offset to its end offset with an unmodified
 * KafkaConsumer (assign, no group) and prints every record as {@code RECORD <offset> <value>}.
 * Usage: {@code java -cp ... exactq.compat.ReadAll <bootstrap> <topic> <partition>}.
 *
 * <p>The consumer's own parsing is the point: a record batch it cannot parse makes poll()
 * throw (Kafka's consumer then throws on every poll at that offset), which this program
 * reports as a "FAIL:" line and exit status 1. Exits 0 with "OK: read N records" when the
 * end offset was reached.
 */
public final class ReadAll {
    static final long TIMEOUT_MS = 60_000;

    public static void main(String[] args) {
        if (args.length != 3) {
            System.err.println("usage: ReadAll <bootstrap host:port> <topic> <partition>");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.CHECK_CRCS_CONFIG, "true");
        TopicPartition tp = new TopicPartition(args[1], Integer.parseInt(args[2]));
        List<String> lines = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            Map<TopicPartition, Long> ends = consumer.endOffsets(List.of(tp), Duration.ofSeconds(30));
            long end = ends.get(tp);
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            while (consumer.position(tp) < end) {
                if (System.currentTimeMillis() > deadline) {
                    System.out.println("FAIL: position " + consumer.position(tp) + " did not reach end offset " + end);
                    System.exit(1);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    String v = r.value() == null ? "<null>" : new String(r.value(), StandardCharsets.UTF_8);
                    lines.add("RECORD " + r.offset() + " " + v);
                }
            }
        } catch (Exception e) {
            System.out.println("FAIL: " + e.getClass().getName() + ": " + e.getMessage());
            System.exit(1);
        }
        for (String l : lines) {
            System.out.println(l);
        }
        System.out.println("OK: read " + lines.size() + " records");
    }
}
