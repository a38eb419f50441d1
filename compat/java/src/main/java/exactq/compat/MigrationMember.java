package exactq.compat;

import static exactq.compat.Checks.check;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One {@code group.protocol=consumer} member joining a group whose other members use the
 * classic protocol (the online migration of KIP-848). Usage: {@code java -cp ...
 * exactq.compat.MigrationMember <bootstrap> <topic> <group> <stopFile> <outFile>}.
 *
 * <p>It subscribes, appends the value of every record it polls to outFile (one a line,
 * flushed before the commit) and commits what it polled with commitSync before it polls
 * again (and, for partitions it gives up, in onPartitionsRevoked), so a record is consumed
 * by this member exactly when its offset is committed by it. It stops once stopFile exists,
 * closing the consumer (its leave heartbeat). Prints "OK: migration member" on success.
 */
public final class MigrationMember {
    static final long DEADLINE_MS = 120_000;

    public static void main(String[] args) {
        Checks.main(args, 5, "MigrationMember <bootstrap> <topic> <group> <stopFile> <outFile>",
                "OK: migration member", () -> run(args[0], args[1], args[2], Path.of(args[3]), Path.of(args[4])));
    }

    static void run(String bootstrap, String topic, String group, Path stop, Path out) throws IOException {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "exactq-compat-java-migration");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        try (BufferedWriter w = Files.newBufferedWriter(out, StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING);
             KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    c.commitSync();
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
            });
            while (!Files.exists(stop)) {
                check(System.currentTimeMillis() < deadline, "never told to stop");
                var records = c.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    w.write(new String(r.value(), StandardCharsets.UTF_8));
                    w.newLine();
                }
                w.flush();
                if (!records.isEmpty()) {
                    c.commitSync();
                }
            }
        }
    }
}
