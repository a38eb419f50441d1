package exactq.compat;

import static exactq.compat.Checks.check;

import exactq.compat.Checks.Mismatch;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Interop check of the reference Java client (kafka-clients, unmodified) against an exactq
 * broker. Usage: {@code java -cp ... exactq.compat.Main <bootstrap host:port>}.
 *
 * <p>Runs the AdminClient checks, then for every compression type an idempotent acks=all
 * producer writes 10k records with headers to a 3-partition topic and an assign()ed consumer
 * reads them back; every key, value, header, timestamp, partition and offset is compared.
 * Exits 0 when everything matched, 1 with a "FAIL:" line on the first mismatch.
 */
public final class Main {
    static final int RECORDS = 10_000;
    static final int PARTITIONS = 3;
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final long TIMEOUT_S = 60;

    public static void main(String[] args) {
        Checks.main(args, 1, "Main <bootstrap host:port>", "OK: all Java client checks passed", () -> {
            adminChecks(args[0]);
            for (String codec : CODECS) {
                roundTrip(args[0], codec);
            }
        });
    }

    static Properties base(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "exactq-compat-java");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        return p;
    }

    static <T> T get(org.apache.kafka.common.KafkaFuture<T> f, String what) throws Exception {
        try {
            return f.get(TIMEOUT_S, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw new Mismatch(what + " failed: " + e.getCause());
        }
    }

    // ---------------------------------------------------------------- admin

    static void adminChecks(String bootstrap) throws Exception {
        try (Admin admin = Admin.create(base(bootstrap))) {
            String topic = "java-admin";
            String doomed = "java-doomed";
            NewTopic nt = new NewTopic(topic, PARTITIONS, (short) 1).configs(Map.of("retention.ms", "3600000"));
            get(admin.createTopics(List.of(nt, new NewTopic(doomed, 1, (short) 1))).all(), "createTopics");
            try {
                admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get(TIMEOUT_S, TimeUnit.SECONDS);
                throw new Mismatch("creating " + topic + " twice succeeded, want TopicExistsException");
            } catch (ExecutionException e) {
                check(e.getCause() instanceof TopicExistsException, "creating %s twice: %s, want TopicExistsException", topic, e.getCause());
            }

            TopicDescription td = get(admin.describeTopics(List.of(topic)).allTopicNames(), "describeTopics").get(topic);
            check(td.partitions().size() == PARTITIONS, "describeTopics %s: %d partitions, want %d", topic, td.partitions().size(), PARTITIONS);
            check(!td.isInternal(), "%s described as internal", topic);
            check(td.topicId() != null && !td.topicId().equals(Uuid.ZERO_UUID), "%s has no topic id", topic);
            for (TopicPartitionInfo p : td.partitions()) {
                check(p.leader() != null && p.leader().id() == 1, "partition %d leader %s, want node 1", p.partition(), p.leader());
                check(p.replicas().size() == 1 && p.replicas().get(0).id() == 1, "partition %d replicas %s, want [1]", p.partition(), p.replicas());
                check(p.isr().size() == 1 && p.isr().get(0).id() == 1, "partition %d isr %s, want [1]", p.partition(), p.isr());
            }

            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config cfg = get(admin.describeConfigs(List.of(res)).all(), "describeConfigs").get(res);
            ConfigEntry retention = cfg.get("retention.ms");
            check(retention != null && "3600000".equals(retention.value()) && retention.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    "retention.ms = %s, want 3600000 from DYNAMIC_TOPIC_CONFIG", retention);
            ConfigEntry cleanup = cfg.get("cleanup.policy");
            check(cleanup != null && "delete".equals(cleanup.value()) && cleanup.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    "cleanup.policy = %s, want the default delete", cleanup);

            Map<ConfigResource, Collection<AlterConfigOp>> alter = Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "2097152"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("retention.ms", null), AlterConfigOp.OpType.DELETE)));
            get(admin.incrementalAlterConfigs(alter).all(), "incrementalAlterConfigs");
            cfg = get(admin.describeConfigs(List.of(res)).all(), "describeConfigs").get(res);
            check("2097152".equals(cfg.get("max.message.bytes").value()), "max.message.bytes after incremental SET: %s", cfg.get("max.message.bytes"));
            check("604800000".equals(cfg.get("retention.ms").value()), "retention.ms after incremental DELETE: %s, want the default 604800000", cfg.get("retention.ms"));

            DescribeClusterResult dc = admin.describeCluster();
            Collection<Node> nodes = get(dc.nodes(), "describeCluster nodes");
            check(nodes.size() == 1 && nodes.iterator().next().id() == 1, "describeCluster nodes %s, want one node with id 1", nodes);
            String clusterId = get(dc.clusterId(), "describeCluster clusterId");
            check(clusterId != null && !clusterId.isEmpty(), "describeCluster: no cluster id");
            Node controller = get(dc.controller(), "describeCluster controller");
            check(controller != null && controller.id() == 1, "describeCluster controller %s, want node 1", controller);

            get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(PARTITIONS + 1))).all(), "createPartitions");
            td = get(admin.describeTopics(List.of(topic)).allTopicNames(), "describeTopics").get(topic);
            check(td.partitions().size() == PARTITIONS + 1, "after createPartitions: %d partitions, want %d", td.partitions().size(), PARTITIONS + 1);

            get(admin.deleteTopics(List.of(doomed)).all(), "deleteTopics");
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
            Set<String> names;
            while (true) {
                names = get(admin.listTopics().names(), "listTopics");
                if (!names.contains(doomed)) {
                    break;
                }
                check(System.nanoTime() < deadline, "%s still listed %ds after deleteTopics", doomed, TIMEOUT_S);
                Thread.sleep(20); // poll interval for metadata propagation, not synchronization
            }
            check(names.contains(topic), "listTopics %s lacks %s", names, topic);
            System.out.println("admin: create/describe/describeConfigs/incrementalAlterConfigs/describeCluster/createPartitions/delete ok");
        }
    }

    // ---------------------------------------------------------------- produce + consume

    static byte[] key(int i) {
        return String.format("key-%06d", i).getBytes(StandardCharsets.UTF_8);
    }

    static byte[] value(String codec, int i) {
        StringBuilder sb = new StringBuilder(String.format("value-%s-%06d|", codec, i));
        for (int n = i % 17; n > 0; n--) {
            sb.append("the quick brown fox jumps over the lazy dog ");
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    static List<Header> headers(String codec, int i) {
        return List.of(
                new RecordHeader("index", Integer.toString(i).getBytes(StandardCharsets.UTF_8)),
                new RecordHeader("codec", codec.getBytes(StandardCharsets.UTF_8)),
                new RecordHeader("empty", new byte[0]));
    }

    static void roundTrip(String bootstrap, String codec) throws Exception {
        String topic = "java-rt-" + codec;
        try (Admin admin = Admin.create(base(bootstrap))) {
            get(admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all(), "createTopics " + topic);
        }

        Properties pp = base(bootstrap);
        pp.remove(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG);
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        pp.put(ProducerConfig.BATCH_SIZE_CONFIG, "65536");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "60000");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        long baseTs = System.currentTimeMillis() - 3_600_000L;
        // position[p] maps offset -> record index, from the producer's acknowledgements.
        Map<Integer, Map<Long, Integer>> position = new HashMap<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            List<Future<RecordMetadata>> acks = new ArrayList<>(RECORDS);
            for (int i = 0; i < RECORDS; i++) {
                acks.add(producer.send(new ProducerRecord<>(topic, null, baseTs + i, key(i), value(codec, i), headers(codec, i))));
            }
            producer.flush();
            for (int i = 0; i < RECORDS; i++) {
                RecordMetadata md;
                try {
                    md = acks.get(i).get(TIMEOUT_S, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    throw new Mismatch(codec + ": record " + i + " failed to produce: " + e.getCause());
                }
                check(md.hasOffset(), "%s: record %d acknowledged without an offset", codec, i);
                Integer prev = position.computeIfAbsent(md.partition(), k -> new HashMap<>()).put(md.offset(), i);
                check(prev == null, "%s: records %d and %d both acknowledged at %d@%d", codec, prev, i, md.partition(), md.offset());
            }
        }
        for (int p = 0; p < PARTITIONS; p++) {
            Map<Long, Integer> offs = position.getOrDefault(p, Map.of());
            check(!offs.isEmpty(), "%s: partition %d got no records; keyed records should spread over all partitions", codec, p);
            for (long o = 0; o < offs.size(); o++) {
                check(offs.containsKey(o), "%s: partition %d acknowledged offsets are not contiguous from 0 (missing %d of %d)", codec, p, o, offs.size());
            }
        }

        Properties cp = base(bootstrap);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        cp.put(ConsumerConfig.CHECK_CRCS_CONFIG, "true");
        cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < PARTITIONS; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        int consumed = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<Integer, Long> next = new HashMap<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
            while (consumed < RECORDS) {
                check(System.nanoTime() < deadline, "%s: consumed %d of %d records in %ds", codec, consumed, RECORDS, TIMEOUT_S);
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    long want = next.getOrDefault(r.partition(), 0L);
                    check(r.offset() == want, "%s: partition %d consumed offset %d, want %d (contiguous, in order, no duplicates)", codec, r.partition(), r.offset(), want);
                    next.put(r.partition(), want + 1);
                    Integer i = position.getOrDefault(r.partition(), Map.of()).get(r.offset());
                    check(i != null, "%s: consumed %d@%d that no acknowledgement placed there", codec, r.partition(), r.offset());
                    check(Arrays.equals(r.key(), key(i)), "%s: %d@%d key %s, want %s", codec, r.partition(), r.offset(), str(r.key()), str(key(i)));
                    check(Arrays.equals(r.value(), value(codec, i)), "%s: %d@%d value differs for record %d", codec, r.partition(), r.offset(), i);
                    check(r.timestampType() == TimestampType.CREATE_TIME && r.timestamp() == baseTs + i,
                            "%s: %d@%d timestamp %d (%s), want CreateTime %d", codec, r.partition(), r.offset(), r.timestamp(), r.timestampType(), baseTs + i);
                    Header[] got = r.headers().toArray();
                    List<Header> want2 = headers(codec, i);
                    check(got.length == want2.size(), "%s: %d@%d has %d headers, want %d", codec, r.partition(), r.offset(), got.length, want2.size());
                    for (int h = 0; h < got.length; h++) {
                        check(got[h].key().equals(want2.get(h).key()) && Arrays.equals(got[h].value(), want2.get(h).value()),
                                "%s: %d@%d header %d %s=%s, want %s=%s", codec, r.partition(), r.offset(), h,
                                got[h].key(), str(got[h].value()), want2.get(h).key(), str(want2.get(h).value()));
                    }
                    consumed++;
                }
            }
            check(consumed == RECORDS, "%s: consumed %d records, want %d", codec, consumed, RECORDS);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(TIMEOUT_S));
            for (TopicPartition tp : tps) {
                long want = position.getOrDefault(tp.partition(), Map.of()).size();
                check(ends.get(tp) == want, "%s: end offset of %s is %d, want %d", codec, tp, ends.get(tp), want);
                check(consumer.position(tp) == want, "%s: position on %s is %d after reading everything, want %d", codec, tp, consumer.position(tp), want);
            }
            ConsumerRecords<byte[], byte[]> extra = consumer.poll(Duration.ofMillis(300));
            check(extra.isEmpty(), "%s: %d records beyond the %d produced", codec, extra.count(), RECORDS);
        }
        System.out.printf("round trip %s: %d records, idempotent acks=all, verified%n", codec, consumed);
    }

    static String str(byte[] b) {
        return b == null ? "null" : new String(b, StandardCharsets.UTF_8);
    }
}
