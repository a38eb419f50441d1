package exactq.compat;

import static exactq.compat.Checks.check;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * KIP-848 consumer groups ({@code group.protocol=consumer}) with the reference Java client.
 * Usage: {@code java -cp ... exactq.compat.ConsumerProtocol <bootstrap> <topic> <group>
 * <records> <partitions> <eosIn> <eosOut> <eosGroup> <transactional.id> <eosInputs> <abortAt>}.
 *
 * <p>Three KafkaConsumers subscribe to the topic in one consumer-protocol group, each
 * committing what it polls (commitSync); once the three hold disjoint, non-empty assignments
 * covering every partition and every record was seen, Admin.describeConsumerGroups must
 * report a CONSUMER group with three members; then one consumer closes (its leave) and the
 * other two must take every partition over. Last, {@link EosPipeline} runs its transactional
 * consume-transform-produce pipeline (sendOffsetsToTransaction with the consumer's group
 * metadata: member id and epoch) with its consumer in a consumer-protocol group.
 *
 * <p>Prints "OK: Java consumer protocol" on success; exits 1 with a "FAIL:" line otherwise.
 */
public final class ConsumerProtocol {
    static final long DEADLINE_MS = 120_000;

    public static void main(String[] args) {
        Checks.main(args, 11, "ConsumerProtocol <bootstrap> <topic> <group> <records> <partitions> <eosIn> <eosOut> <eosGroup> <transactional.id> <eosInputs> <abortAt>",
                "OK: Java consumer protocol", () -> {
                    group(args[0], args[1], args[2], Integer.parseInt(args[3]), Integer.parseInt(args[4]));
                    EosPipeline.groupProtocol = "consumer";
                    EosPipeline.run(args[0], args[5], args[6], args[7], args[8], Integer.parseInt(args[9]), Integer.parseInt(args[10]));
                });
    }

    /** One consumer polling and committing on its own thread. */
    static final class Member implements Runnable {
        final Properties props;
        final String topic;
        final Set<String> seen;
        final AtomicReference<Set<TopicPartition>> assignment = new AtomicReference<>(Set.of());
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        volatile boolean stop;
        final Thread thread = new Thread(this);

        Member(Properties props, String topic, Set<String> seen) {
            this.props = props;
            this.topic = topic;
            this.seen = seen;
        }

        @Override
        public void run() {
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props)) {
                c.subscribe(List.of(topic));
                while (!stop) {
                    var records = c.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<byte[], byte[]> r : records) {
                        seen.add(new String(r.value(), StandardCharsets.UTF_8));
                    }
                    if (!records.isEmpty()) {
                        c.commitSync();
                    }
                    assignment.set(new HashSet<>(c.assignment()));
                }
            } catch (Throwable t) {
                failure.set(t);
            }
        }
    }

    static void waitFor(String what, long deadline, List<Member> members, java.util.function.BooleanSupplier ok) throws InterruptedException {
        while (!ok.getAsBoolean()) {
            for (Member m : members) {
                if (m.failure.get() != null) {
                    throw new RuntimeException("consumer failed while waiting for " + what, m.failure.get());
                }
            }
            check(System.currentTimeMillis() < deadline, "timed out waiting for %s", what);
            Thread.sleep(50);
        }
    }

    /** Whether the members' assignments are non-empty, disjoint and cover every partition. */
    static boolean covers(List<Member> members, int partitions) {
        Set<TopicPartition> all = new HashSet<>();
        int sum = 0;
        for (Member m : members) {
            Set<TopicPartition> a = m.assignment.get();
            if (a.isEmpty()) {
                return false;
            }
            all.addAll(a);
            sum += a.size();
        }
        return sum == partitions && all.size() == partitions;
    }

    static void group(String bootstrap, String topic, String group, int records, int partitions) throws Exception {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Set<String> seen = ConcurrentHashMap.newKeySet();
        List<Member> members = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            Properties p = (Properties) c.clone();
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, "exactq-compat-java-848-" + i);
            Member m = new Member(p, topic, seen);
            members.add(m);
            m.thread.start();
        }
        try {
            waitFor("three members covering every partition and every record", deadline, members,
                    () -> covers(members, partitions) && seen.size() == records);
            Properties a = new Properties();
            a.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            try (Admin admin = Admin.create(a)) {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
                check(d.type() == GroupType.CONSUMER, "describeConsumerGroups: type %s, want CONSUMER", d.type());
                check(d.members().size() == 3, "describeConsumerGroups: %d members, want 3", d.members().size());
            }
            Member gone = members.remove(2);
            gone.stop = true;
            gone.thread.join(30_000);
            check(gone.failure.get() == null, "closing a consumer failed: %s", gone.failure.get());
            waitFor("two members covering every partition", deadline, members, () -> covers(members, partitions));
        } finally {
            for (Member m : members) {
                m.stop = true;
            }
            for (Member m : members) {
                m.thread.join(30_000);
            }
        }
        for (Member m : members) {
            check(m.failure.get() == null, "consumer failed: %s", m.failure.get());
        }
    }
}
