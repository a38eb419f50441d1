package exactq.compat;

import static exactq.compat.Checks.check;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Exactly-once consume-transform-produce with the reference Java client against exactq.
 * Usage: {@code java -cp ... exactq.compat.EosPipeline <bootstrap> <in> <out> <group>
 * <transactional.id> <inputs> <abortAt>}.
 *
 * <p>A KafkaConsumer (group, isolation.level=read_committed, no auto-commit,
 * max.poll.records=200) reads the input topic; every poll becomes one transaction of a
 * transactional KafkaProducer: one output per input (key {@code out-<key>}, value
 * {@code J(<value>)}), then sendOffsetsToTransaction(offsets, consumer.groupMetadata()) and
 * commitTransaction. Transaction number abortAt is aborted instead, after which the consumer
 * seeks back to its committed offsets and redoes those inputs. It stops once the committed
 * transactions hold {@code inputs} inputs and the consumer's position is at the input end
 * offsets. Then a fresh read_committed consumer reads the output from the beginning up to its
 * end offsets (the LSO) and checks that every input's output is there exactly once.
 *
 * <p>Prints "ABORTED n" (outputs in the aborted transaction), "COMMITTED_TXNS n", and
 * "OK: Java EOS pipeline" on success; exits 1 with a "FAIL:" line otherwise.
 */
public final class EosPipeline {
    static final long DEADLINE_MS = 180_000;

    static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    public static void main(String[] args) {
        Checks.main(args, 7, "EosPipeline <bootstrap> <in> <out> <group> <transactional.id> <inputs> <abortAt>", "OK: Java EOS pipeline",
                () -> run(args[0], args[1], args[2], args[3], args[4], Integer.parseInt(args[5]), Integer.parseInt(args[6])));
    }

    /** The pipeline consumer's group.protocol; null keeps the client default (classic). */
    static String groupProtocol = null;

    static Properties consumerProps(String bootstrap, String group) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.CLIENT_ID_CONFIG, "exactq-compat-java-eos");
        if (group != null) {
            c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            if (groupProtocol != null) {
                c.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, groupProtocol);
            }
        }
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "200");
        c.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return c;
    }

    static void run(String bootstrap, String in, String out, String group, String txnId, int inputs, int abortAt) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "exactq-compat-java-eos");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        int committedInputs = 0;
        int txns = 0;
        int committedTxns = 0;
        int aborted = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(bootstrap, group));
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            consumer.subscribe(List.of(in));
            Map<TopicPartition, Long> inEnds = null;
            while (true) {
                check(System.currentTimeMillis() < deadline, "pipeline did not finish: %d of %d inputs committed in %d transactions", committedInputs, inputs, committedTxns);
                if (committedInputs >= inputs && !consumer.assignment().isEmpty()) {
                    if (inEnds == null) {
                        inEnds = consumer.endOffsets(consumer.assignment());
                    }
                    boolean atEnd = true;
                    for (Map.Entry<TopicPartition, Long> e : inEnds.entrySet()) {
                        atEnd &= consumer.position(e.getKey()) >= e.getValue();
                    }
                    if (atEnd) {
                        break;
                    }
                }
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                txns++;
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    producer.send(new ProducerRecord<>(out, ("out-" + str(r.key())).getBytes(StandardCharsets.UTF_8),
                            ("J(" + str(r.value()) + ")").getBytes(StandardCharsets.UTF_8)));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                if (txns == abortAt) {
                    producer.flush(); // the outputs reach the log, then are aborted
                    producer.abortTransaction();
                    aborted += recs.count();
                    // Redo: back to what the group committed.
                    Set<TopicPartition> assigned = consumer.assignment();
                    Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned);
                    for (TopicPartition tp : assigned) {
                        OffsetAndMetadata o = committed.get(tp);
                        if (o == null) {
                            consumer.seekToBeginning(List.of(tp));
                        } else {
                            consumer.seek(tp, o.offset());
                        }
                    }
                    continue;
                }
                producer.commitTransaction();
                committedTxns++;
                committedInputs += recs.count();
            }
            check(committedInputs == inputs, "committed transactions hold %d inputs, want %d (a redelivered input?)", committedInputs, inputs);
            // The group's committed offsets are the input end offsets.
            Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(inEnds.keySet());
            for (Map.Entry<TopicPartition, Long> e : inEnds.entrySet()) {
                OffsetAndMetadata o = committed.get(e.getKey());
                check(o != null && o.offset() == e.getValue(), "group committed %s for %s, want the end offset %d", o, e.getKey(), e.getValue());
            }
        }
        check(aborted > 0, "the injected abort (transaction %d) never happened", abortAt);
        System.out.println("ABORTED " + aborted);
        System.out.println("COMMITTED_TXNS " + committedTxns);

        // Verify the output with a fresh read_committed consumer.
        try (KafkaConsumer<byte[], byte[]> reader = new KafkaConsumer<>(consumerProps(bootstrap, null))) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : reader.partitionsFor(out)) {
                tps.add(new TopicPartition(out, pi.partition()));
            }
            reader.assign(tps);
            reader.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = reader.endOffsets(tps); // read_committed: the LSO
            Map<String, Integer> seen = new HashMap<>();
            int total = 0;
            while (true) {
                check(System.currentTimeMillis() < deadline, "output reader did not reach end offsets %s", ends);
                boolean done = true;
                for (TopicPartition tp : tps) {
                    done &= reader.position(tp) >= ends.get(tp);
                }
                if (done) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : reader.poll(Duration.ofMillis(200))) {
                    String k = str(r.key());
                    check(k.startsWith("out-"), "output %s-%d@%d has key %s", r.topic(), r.partition(), r.offset(), k);
                    String v = str(r.value());
                    check(v.startsWith("J(") && v.endsWith(")"), "output %s has value %s", k, v);
                    seen.merge(k, 1, Integer::sum);
                    total++;
                }
            }
            Set<String> dups = new HashSet<>();
            for (Map.Entry<String, Integer> e : seen.entrySet()) {
                if (e.getValue() != 1) {
                    dups.add(e.getKey() + "x" + e.getValue());
                }
            }
            check(dups.isEmpty(), "read_committed sees duplicated outputs: %s", dups.size() > 5 ? new ArrayList<>(dups).subList(0, 5) : dups);
            check(total == inputs && seen.size() == inputs, "read_committed sees %d outputs (%d distinct), want %d", total, seen.size(), inputs);
        }
    }
}
