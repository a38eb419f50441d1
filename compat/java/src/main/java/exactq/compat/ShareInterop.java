package exactq.compat;

import static exactq.compat.Checks.check;

import exactq.compat.Checks.Mismatch;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Share groups (KIP-932) with the reference Java client against exactq: KafkaShareConsumer
 * 4.4 in implicit and explicit acknowledgement mode, and the Admin share-group calls.
 * Usage: {@code java -cp ... exactq.compat.ShareInterop <bootstrap> <lockMs>}; the broker must
 * allow a group record-lock duration of lockMs and a delivery count limit of 2.
 *
 * <p>Every check has its own single-partition topic and share group (group config
 * share.auto.offset.reset=earliest, set through Admin incrementalAlterConfigs on the GROUP
 * resource):
 * <ul>
 * <li>multi: 3 implicit-mode consumers on one partition, 3000 records; each gets some, the
 * union is exactly all, none twice; Admin describeShareGroups shows the 3 members with the
 * partition assigned and listShareGroupOffsets start offset 3000, lag 0.
 * <li>release: explicit RELEASE comes back with deliveryCount 2; listShareGroupOffsets shows
 * lag 1 while it is released.
 * <li>reject: explicit REJECT never comes back.
 * <li>lock: a record left unacknowledged is redelivered to another consumer, deliveryCount 2,
 * once the group's share.record.lock.duration.ms (lockMs) has passed.
 * <li>limit: with share.delivery.count.limit=2 a record RELEASEd twice is archived.
 * <li>renew: a record RENEWed for 3 lock durations is never given to another consumer and its
 * final ACCEPT succeeds.
 * <li>record_limit: share.acquire.mode=record_limit never returns more than max.poll.records
 * from one 100-record batch.
 * <li>offsets: Admin alterShareGroupOffsets and deleteShareGroupOffsets on an empty group (a
 * group with a member is GroupNotEmptyException): the next consumer starts at the altered
 * offset, and after the delete from share.auto.offset.reset again; deleteShareGroups.
 * <li>features: Admin describeFeatures shows share.version 1; updateFeatures downgrades it to 0
 * (share RPCs then fail with UnsupportedVersionException), refuses level 2, and upgrades it
 * back.
 * </ul>
 * Prints "OK: Java share-group checks passed" on success; exits 1 with a "FAIL:" line otherwise.
 */
public final class ShareInterop {
    static final long STEP_MS = 20_000; // deadline of each wait for a condition

    static String bootstrap;
    static int lockMs;
    static Admin admin;
    static KafkaProducer<String, String> producer;

    public static void main(String[] args) {
        Checks.main(args, 2, "ShareInterop <bootstrap> <lockMs>", "OK: Java share-group checks passed", () -> {
            bootstrap = args[0];
            lockMs = Integer.parseInt(args[1]);
            run();
        });
    }

    static void run() throws Exception {
        Properties a = new Properties();
        a.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        a.put(AdminClientConfig.CLIENT_ID_CONFIG, "exactq-compat-java-share-admin");
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "exactq-compat-java-share-producer");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (Admin ad = Admin.create(a); KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
            admin = ad;
            producer = pr;
            List<NewTopic> topics = new ArrayList<>();
            for (String t : List.of("multi", "release", "reject", "lock", "limit", "renew", "rlimit", "offsets")) {
                topics.add(new NewTopic("jsq-" + t, 1, (short) 1));
            }
            admin.createTopics(topics).all().get(30, TimeUnit.SECONDS);
            timed("multi", ShareInterop::multi);
            timed("release", ShareInterop::release);
            timed("reject", ShareInterop::reject);
            timed("lock", ShareInterop::lockExpiry);
            timed("limit", ShareInterop::deliveryLimit);
            timed("renew", ShareInterop::renew);
            timed("record_limit", ShareInterop::recordLimit);
            timed("offsets", ShareInterop::alterDeleteOffsets);
            timed("features", ShareInterop::features); // last: it turns share groups off and on
        }
    }

    interface Check {
        void run() throws Exception;
    }

    static void timed(String name, Check c) throws Exception {
        long t0 = System.nanoTime();
        c.run();
        System.out.printf("ok %s (%d ms)%n", name, (System.nanoTime() - t0) / 1_000_000);
    }

    // ---- helpers ----

    static void groupConfig(String group, Map<String, String> kv) throws Exception {
        List<AlterConfigOp> ops = new ArrayList<>();
        kv.forEach((k, v) -> ops.add(new AlterConfigOp(new ConfigEntry(k, v), AlterConfigOp.OpType.SET)));
        admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group), ops))
                .all().get(30, TimeUnit.SECONDS);
    }

    static void produce(String topic, String... values) throws Exception {
        for (String v : values) {
            producer.send(new ProducerRecord<>(topic, 0, null, v)).get(30, TimeUnit.SECONDS);
        }
    }

    static KafkaShareConsumer<String, String> consumer(String group, String name, boolean explicit, int maxPoll) {
        return consumer(group, name, explicit, maxPoll, new Properties());
    }

    static KafkaShareConsumer<String, String> consumer(String group, String name, boolean explicit, int maxPoll, Properties c) {
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.CLIENT_ID_CONFIG, "exactq-" + name);
        c.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, explicit ? "explicit" : "implicit");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(maxPoll));
        c.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaShareConsumer<>(c);
    }

    static int dc(ConsumerRecord<String, String> r) {
        Optional<Short> d = r.deliveryCount();
        check(d.isPresent(), "record %s@%d from a share consumer has no delivery count", r.value(), r.offset());
        return d.get();
    }

    /** Polls until a poll returns at least one record, which it returns; fails after STEP_MS. */
    static ConsumerRecords<String, String> pollSome(KafkaShareConsumer<String, String> c, String what) {
        long deadline = System.currentTimeMillis() + STEP_MS;
        while (System.currentTimeMillis() < deadline) {
            ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(200));
            if (!recs.isEmpty()) {
                return recs;
            }
        }
        throw new Mismatch(what + ": no record within " + STEP_MS + " ms");
    }

    static void commitOk(KafkaShareConsumer<String, String> c, String what) {
        Map<TopicIdPartition, Optional<KafkaException>> res = c.commitSync(Duration.ofMillis(STEP_MS));
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : res.entrySet()) {
            check(e.getValue().isEmpty(), "%s: commitSync: %s: %s", what, e.getKey(), e.getValue().orElse(null));
        }
    }

    static ShareGroupDescription describe(String group) throws Exception {
        return admin.describeShareGroups(List.of(group)).describedGroups().get(group).get(30, TimeUnit.SECONDS);
    }

    static SharePartitionOffsetInfo offsets(String group, String topic) throws Exception {
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<TopicPartition, SharePartitionOffsetInfo> m = admin
                .listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec().topicPartitions(List.of(tp))))
                .partitionsToOffsetInfo(group).get(30, TimeUnit.SECONDS);
        SharePartitionOffsetInfo o = m.get(tp);
        check(o != null, "listShareGroupOffsets(%s) has no entry for %s: %s", group, tp, m);
        return o;
    }

    static void expectOffsets(String group, String topic, long start, long lag) throws Exception {
        SharePartitionOffsetInfo o = offsets(group, topic);
        check(o.startOffset() == start && o.lag().equals(Optional.of(lag)),
                "listShareGroupOffsets(%s, %s-0) = %s, want start offset %d and lag %d", group, topic, o, start, lag);
    }

    /**
     * Polls c (explicit mode, every record ACCEPTed) until the record with value sentinel
     * arrives; fails if a record in never arrives before it.
     */
    static void drainToSentinel(KafkaShareConsumer<String, String> c, String sentinel, Collection<String> never, String what) {
        long deadline = System.currentTimeMillis() + STEP_MS;
        while (true) {
            check(System.currentTimeMillis() < deadline, "%s: sentinel %s not delivered within %d ms", what, sentinel, STEP_MS);
            boolean done = false;
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                check(!never.contains(r.value()), "%s: %s delivered again (deliveryCount %s)", what, r.value(), r.deliveryCount());
                c.acknowledge(r, AcknowledgeType.ACCEPT);
                done |= r.value().equals(sentinel);
            }
            if (done) {
                commitOk(c, what);
                return;
            }
        }
    }

    // ---- checks ----

    /** Three implicit-mode consumers on one partition all make progress, each record once. */
    static void multi() throws Exception {
        final String topic = "jsq-multi", group = "jsq-multi";
        final int n = 3000, consumers = 3;
        groupConfig(group, Map.of("share.auto.offset.reset", "earliest"));
        ConcurrentHashMap<String, Integer> seen = new ConcurrentHashMap<>();
        AtomicInteger dups = new AtomicInteger();
        AtomicInteger[] per = new AtomicInteger[consumers];
        AtomicReference<Throwable> err = new AtomicReference<>();
        CountDownLatch drained = new CountDownLatch(consumers);
        CountDownLatch release = new CountDownLatch(1);
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        List<Thread> threads = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 60_000;
        for (int i = 0; i < consumers; i++) {
            final int id = i;
            per[i] = new AtomicInteger();
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer(group, "jsq-multi-" + id, false, 50)) {
                    c.subscribe(List.of(topic));
                    while (seen.size() < n && System.currentTimeMillis() < deadline && err.get() == null && !stop.get()) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(100))) {
                            if (seen.merge(r.value(), 1, Integer::sum) > 1) {
                                dups.incrementAndGet();
                                err.compareAndSet(null, new Mismatch("multi: " + r.value() + " delivered twice (deliveryCount " + r.deliveryCount() + ")"));
                            }
                            per[id].incrementAndGet();
                        }
                    }
                    commitOk(c, "multi consumer " + id); // implicit mode: ACCEPTs the last poll
                    drained.countDown();
                    // Stay a member until main has described the group.
                    release.await(60, TimeUnit.SECONDS);
                } catch (Throwable e) {
                    err.compareAndSet(null, e);
                    drained.countDown();
                }
            }, "jsq-multi-" + id);
            t.start();
            threads.add(t);
        }
        try {
            // All three are members with the partition before anything is produced, so none can
            // drain the queue before the others join.
            waitFor(() -> {
                ShareGroupDescription d = describe(group);
                if (d.members().size() != consumers) {
                    return "members " + d.members();
                }
                for (ShareMemberDescription m : d.members()) {
                    if (!m.assignment().topicPartitions().contains(new TopicPartition(topic, 0))) {
                        return "member without " + topic + "-0: " + m;
                    }
                }
                return null;
            }, "multi: 3 members assigned " + topic + "-0");
            for (int i = 0; i < n; i += 100) { // batches of 100: acquisition can spread
                for (int j = i; j < i + 100; j++) {
                    producer.send(new ProducerRecord<>(topic, 0, null, String.format("m-%05d", j)));
                }
                producer.flush();
            }
            check(drained.await(90, TimeUnit.SECONDS), "multi: consumers did not finish");
            if (err.get() instanceof Mismatch mm) {
                throw mm;
            } else if (err.get() != null) {
                throw new RuntimeException("multi consumer", err.get());
            }
            check(seen.size() == n, "multi: %d distinct records delivered, want %d", seen.size(), n);
            check(dups.get() == 0, "multi: %d duplicate deliveries", dups.get());
            for (int i = 0; i < consumers; i++) {
                check(per[i].get() > 0, "multi: consumer %d got no record (counts %d/%d/%d)", i, per[0].get(), per[1].get(), per[2].get());
            }
            System.out.printf("multi: per-consumer counts %d/%d/%d%n", per[0].get(), per[1].get(), per[2].get());

            ShareGroupDescription d = describe(group);
            check(d.groupState() == GroupState.STABLE, "multi: describeShareGroups state %s, want STABLE", d.groupState());
            check(d.members().size() == consumers, "multi: describeShareGroups members %s, want %d", d.members(), consumers);
            for (ShareMemberDescription m : d.members()) {
                check(m.assignment().topicPartitions().equals(java.util.Set.of(new TopicPartition(topic, 0))),
                        "multi: member %s assignment %s, want [%s-0]", m.consumerId(), m.assignment(), topic);
                check(m.clientId().startsWith("exactq-jsq-multi-"), "multi: member client id %s", m.clientId());
            }
            expectOffsets(group, topic, n, 0);
        } finally {
            stop.set(true);
            release.countDown();
            for (Thread t : threads) {
                t.join(30_000);
            }
        }
    }

    /** RELEASE redelivers with a higher delivery count; the released record counts as lag. */
    static void release() throws Exception {
        final String topic = "jsq-release", group = "jsq-release";
        groupConfig(group, Map.of("share.auto.offset.reset", "earliest"));
        produce(topic, "r0", "r1", "r2", "r3", "r4");
        try (KafkaShareConsumer<String, String> c = consumer(group, "jsq-release", true, 100)) {
            c.subscribe(List.of(topic));
            Map<String, Integer> got = new HashMap<>();
            while (got.size() < 5) {
                for (ConsumerRecord<String, String> r : pollSome(c, "release: first delivery")) {
                    check(dc(r) == 1, "release: first delivery of %s has deliveryCount %d, want 1", r.value(), dc(r));
                    got.put(r.value(), dc(r));
                    c.acknowledge(r, r.value().equals("r0") ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                }
            }
            commitOk(c, "release");
            expectOffsets(group, topic, 0, 1); // r0 AVAILABLE again, r1-r4 done
            ConsumerRecords<String, String> again = pollSome(c, "release: redelivery of r0");
            check(again.count() == 1, "release: %d records redelivered, want only r0", again.count());
            ConsumerRecord<String, String> r = again.iterator().next();
            check(r.value().equals("r0") && r.offset() == 0, "release: redelivered %s@%d, want r0@0", r.value(), r.offset());
            check(dc(r) == 2, "release: redelivered r0 has deliveryCount %d, want 2", dc(r));
            c.acknowledge(r, AcknowledgeType.ACCEPT);
            commitOk(c, "release");
            expectOffsets(group, topic, 5, 0);
        }
    }

    /** REJECT archives: the record never comes back. */
    static void reject() throws Exception {
        final String topic = "jsq-reject", group = "jsq-reject";
        groupConfig(group, Map.of("share.auto.offset.reset", "earliest"));
        produce(topic, "x0", "x1", "x2");
        try (KafkaShareConsumer<String, String> c = consumer(group, "jsq-reject", true, 100)) {
            c.subscribe(List.of(topic));
            int got = 0;
            while (got < 3) {
                for (ConsumerRecord<String, String> r : pollSome(c, "reject: first delivery")) {
                    c.acknowledge(r, r.value().equals("x1") ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT);
                    got++;
                }
            }
            commitOk(c, "reject");
            expectOffsets(group, topic, 3, 0);
            produce(topic, "x-sentinel");
            drainToSentinel(c, "x-sentinel", List.of("x0", "x1", "x2"), "reject");
            expectOffsets(group, topic, 4, 0);
        }
    }

    /** A record left unacknowledged past the lock duration goes to another consumer. */
    static void lockExpiry() throws Exception {
        final String topic = "jsq-lock", group = "jsq-lock";
        groupConfig(group, Map.of("share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", String.valueOf(lockMs)));
        produce(topic, "l0");
        try (KafkaShareConsumer<String, String> a = consumer(group, "jsq-lock-a", true, 100);
             KafkaShareConsumer<String, String> b = consumer(group, "jsq-lock-b", true, 100)) {
            a.subscribe(List.of(topic));
            ConsumerRecords<String, String> held = pollSome(a, "lock: first delivery");
            long acquired = System.currentTimeMillis();
            ConsumerRecord<String, String> r = held.iterator().next();
            check(r.value().equals("l0") && dc(r) == 1, "lock: first delivery %s deliveryCount %d, want l0 with 1", r.value(), dc(r));
            Optional<Integer> lt = a.acquisitionLockTimeoutMs();
            check(lt.equals(Optional.of(lockMs)), "lock: acquisitionLockTimeoutMs %s, want %d (the group's share.record.lock.duration.ms)", lt, lockMs);
            // a never acknowledges l0 and polls no more; b gets it once the lock expires.
            b.subscribe(List.of(topic));
            ConsumerRecords<String, String> again = pollSome(b, "lock: redelivery after lock expiry");
            long after = System.currentTimeMillis() - acquired;
            ConsumerRecord<String, String> r2 = again.iterator().next();
            // 2, or more if a's background prefetch re-acquired l0 after the first expiry and
            // that lock expired too (Kafka lets the same member re-acquire an expired record).
            check(r2.value().equals("l0") && dc(r2) >= 2, "lock: redelivered %s deliveryCount %d, want l0 with 2 or more", r2.value(), dc(r2));
            check(after >= lockMs / 2, "lock: l0 redelivered %d ms after acquisition, before its %d ms lock could expire", after, lockMs);
            b.acknowledge(r2, AcknowledgeType.ACCEPT);
            commitOk(b, "lock");
            System.out.printf("lock: redelivered %d ms after acquisition, deliveryCount %d (lock %d ms)%n", after, dc(r2), lockMs);
            expectOffsets(group, topic, 1, 0);
        }
    }

    /** With share.delivery.count.limit=2 a record released twice is archived. */
    static void deliveryLimit() throws Exception {
        final String topic = "jsq-limit", group = "jsq-limit";
        groupConfig(group, Map.of("share.auto.offset.reset", "earliest", "share.delivery.count.limit", "2"));
        produce(topic, "d0");
        try (KafkaShareConsumer<String, String> c = consumer(group, "jsq-limit", true, 100)) {
            c.subscribe(List.of(topic));
            for (int want = 1; want <= 2; want++) {
                ConsumerRecords<String, String> recs = pollSome(c, "limit: delivery " + want);
                check(recs.count() == 1, "limit: delivery %d returned %d records, want d0 only", want, recs.count());
                ConsumerRecord<String, String> r = recs.iterator().next();
                check(r.value().equals("d0") && dc(r) == want, "limit: delivery %d is %s with deliveryCount %d", want, r.value(), dc(r));
                c.acknowledge(r, AcknowledgeType.RELEASE);
                commitOk(c, "limit");
            }
            expectOffsets(group, topic, 1, 0); // archived at the limit
            produce(topic, "d-sentinel");
            drainToSentinel(c, "d-sentinel", List.of("d0"), "limit");
        }
    }

    /** RENEW keeps a slow record locked past several lock durations. */
    static void renew() throws Exception {
        final String topic = "jsq-renew", group = "jsq-renew";
        groupConfig(group, Map.of("share.auto.offset.reset", "earliest", "share.record.lock.duration.ms", String.valueOf(lockMs)));
        produce(topic, "w0");
        try (KafkaShareConsumer<String, String> a = consumer(group, "jsq-renew-a", true, 100);
             KafkaShareConsumer<String, String> b = consumer(group, "jsq-renew-b", true, 100)) {
            a.subscribe(List.of(topic));
            ConsumerRecord<String, String> r = pollSome(a, "renew: first delivery").iterator().next();
            long t0 = System.currentTimeMillis();
            check(r.value().equals("w0"), "renew: got %s, want w0", r.value());
            b.subscribe(List.of(topic));
            int renews = 0;
            // a renews w0 about three times per lock duration while b polls the same partition;
            // b's polls are the pacing, nothing waits on a timer.
            while (System.currentTimeMillis() - t0 < 3L * lockMs) {
                a.acknowledge(r, AcknowledgeType.RENEW);
                commitOk(a, "renew: RENEW #" + (renews + 1));
                renews++;
                for (ConsumerRecord<String, String> x : b.poll(Duration.ofMillis(lockMs / 4))) {
                    throw new Mismatch(String.format("renew: %s given to another consumer %d ms after acquisition despite %d RENEWs (deliveryCount %s)",
                            x.value(), System.currentTimeMillis() - t0, renews, x.deliveryCount()));
                }
                // The client hands a renewed record back on the next poll (ShareInFlightBatch.renew),
                // where it can be acknowledged again.
                ConsumerRecords<String, String> back = pollSome(a, "renew: renewed record back from poll after RENEW #" + renews);
                check(back.count() == 1, "renew: poll after RENEW #%d returned %d records, want w0 only", renews, back.count());
                r = back.iterator().next();
                check(r.value().equals("w0") && dc(r) == 1, "renew: poll after RENEW #%d returned %s with deliveryCount %d, want w0 with 1", renews, r.value(), dc(r));
            }
            a.acknowledge(r, AcknowledgeType.ACCEPT);
            commitOk(a, "renew: final ACCEPT after " + renews + " RENEWs");
            produce(topic, "w-sentinel");
            drainToSentinel(b, "w-sentinel", List.of("w0"), "renew");
            expectOffsets(group, topic, 2, 0);
            System.out.printf("renew: held %d ms with %d RENEWs (lock %d ms)%n", System.currentTimeMillis() - t0, renews, lockMs);
        }
    }

    /** share.acquire.mode=record_limit: no poll exceeds max.poll.records, even inside one batch. */
    static void recordLimit() throws Exception {
        final String topic = "jsq-rlimit", group = "jsq-rlimit";
        final int n = 100, max = 7;
        groupConfig(group, Map.of("share.auto.offset.reset", "earliest"));
        for (int i = 0; i < n; i++) {
            producer.send(new ProducerRecord<>(topic, 0, null, String.format("q-%03d", i)));
        }
        producer.flush();
        Properties extra = new Properties();
        extra.put(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, "record_limit");
        try (KafkaShareConsumer<String, String> c = consumer(group, "jsq-rlimit", false, max, extra)) {
            c.subscribe(List.of(topic));
            java.util.Set<String> seen = new java.util.HashSet<>();
            int polls = 0;
            while (seen.size() < n) {
                ConsumerRecords<String, String> recs = pollSome(c, "record_limit: " + seen.size() + " of " + n);
                polls++;
                check(recs.count() <= max, "record_limit: a poll returned %d records, max.poll.records is %d", recs.count(), max);
                for (ConsumerRecord<String, String> r : recs) {
                    check(seen.add(r.value()), "record_limit: %s delivered twice", r.value());
                }
            }
            commitOk(c, "record_limit");
            expectOffsets(group, topic, n, 0);
            System.out.printf("record_limit: %d records in %d polls of at most %d%n", n, polls, max);
        }
    }

    /** Expects the future to fail with a cause of type want. */
    static void expectFailure(org.apache.kafka.common.KafkaFuture<?> f, Class<? extends Throwable> want, String what) throws Exception {
        try {
            f.get(30, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            check(want.isInstance(e.getCause()), "%s: failed with %s, want %s", what, e.getCause(), want.getSimpleName());
            return;
        }
        throw new Mismatch(what + ": succeeded, want " + want.getSimpleName());
    }

    /** Admin alterShareGroupOffsets, deleteShareGroupOffsets and deleteShareGroups. */
    static void alterDeleteOffsets() throws Exception {
        final String topic = "jsq-offsets", group = "jsq-offsets";
        final TopicPartition tp = new TopicPartition(topic, 0);
        groupConfig(group, Map.of("share.auto.offset.reset", "earliest"));
        produce(topic, "o0", "o1", "o2", "o3", "o4");
        try (KafkaShareConsumer<String, String> c = consumer(group, "jsq-offsets-a", true, 10)) {
            c.subscribe(List.of(topic));
            int got = 0;
            while (got < 5) {
                for (ConsumerRecord<String, String> r : pollSome(c, "offsets: first 5")) {
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                    got++;
                }
            }
            commitOk(c, "offsets: first 5");
            expectOffsets(group, topic, 5, 0);
            expectFailure(admin.alterShareGroupOffsets(group, Map.of(tp, 2L)).all(),
                    org.apache.kafka.common.errors.GroupNotEmptyException.class, "offsets: alter with a member");
            expectFailure(admin.deleteShareGroupOffsets(group, java.util.Set.of(topic)).all(),
                    org.apache.kafka.common.errors.GroupNotEmptyException.class, "offsets: delete with a member");
        }
        waitFor(() -> describe(group).members().isEmpty() ? null : "members " + describe(group).members(), "offsets: group empty");

        var alter = admin.alterShareGroupOffsets(group, Map.of(tp, 2L, new TopicPartition(topic, 7), 0L));
        alter.partitionResult(tp).get(30, TimeUnit.SECONDS);
        expectFailure(alter.partitionResult(new TopicPartition(topic, 7)),
                org.apache.kafka.common.errors.UnknownTopicOrPartitionException.class, "offsets: alter of a missing partition");
        expectOffsets(group, topic, 2, 3);
        try (KafkaShareConsumer<String, String> c = consumer(group, "jsq-offsets-b", true, 10)) {
            c.subscribe(List.of(topic));
            List<String> vals = new ArrayList<>();
            while (vals.size() < 3) {
                for (ConsumerRecord<String, String> r : pollSome(c, "offsets: after alter")) {
                    check(dc(r) == 1, "offsets: %s after alter has deliveryCount %d, want 1", r.value(), dc(r));
                    vals.add(r.value());
                    c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
            }
            check(vals.equals(List.of("o2", "o3", "o4")), "offsets: after alter to 2 got %s, want [o2, o3, o4]", vals);
            commitOk(c, "offsets: after alter");
        }
        waitFor(() -> describe(group).members().isEmpty() ? null : "members " + describe(group).members(), "offsets: group empty again");

        var del = admin.deleteShareGroupOffsets(group, java.util.Set.of(topic, "jsq-no-such-topic"));
        del.topicResult(topic).get(30, TimeUnit.SECONDS);
        expectFailure(del.topicResult("jsq-no-such-topic"),
                org.apache.kafka.common.errors.UnknownTopicOrPartitionException.class, "offsets: delete of a missing topic");
        try (KafkaShareConsumer<String, String> c = consumer(group, "jsq-offsets-c", true, 10)) {
            c.subscribe(List.of(topic));
            ConsumerRecords<String, String> recs = pollSome(c, "offsets: after delete");
            ConsumerRecord<String, String> first = recs.iterator().next();
            check(first.offset() == 0 && dc(first) == 1, "offsets: after delete the first record is %s@%d (deliveryCount %d), want o0@0, 1",
                    first.value(), first.offset(), dc(first));
            for (ConsumerRecord<String, String> r : recs) {
                c.acknowledge(r, AcknowledgeType.RELEASE);
            }
            commitOk(c, "offsets: after delete");
        }
        waitFor(() -> describe(group).members().isEmpty() ? null : "members " + describe(group).members(), "offsets: group empty at the end");
        admin.deleteShareGroups(List.of(group)).all().get(30, TimeUnit.SECONDS);
        expectFailure(admin.describeShareGroups(List.of(group)).describedGroups().get(group),
                org.apache.kafka.common.errors.GroupIdNotFoundException.class, "offsets: describe after deleteShareGroups");
    }

    /** Admin describeFeatures and updateFeatures on share.version (kafka-features.sh). */
    static void features() throws Exception {
        var fm = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS);
        var sv = fm.finalizedFeatures().get("share.version");
        check(sv != null && sv.maxVersionLevel() == 1, "features: finalized share.version %s, want 1 (all: %s)", sv, fm.finalizedFeatures());
        check(fm.supportedFeatures().get("share.version") != null && fm.supportedFeatures().get("share.version").maxVersion() == 1,
                "features: supported share.version %s", fm.supportedFeatures().get("share.version"));
        var tv = fm.finalizedFeatures().get("transaction.version");
        check(tv != null && tv.maxVersionLevel() == 2, "features: finalized transaction.version %s, want 2", tv);
        long epoch = fm.finalizedFeaturesEpoch().orElse(-1L);

        expectFailure(admin.updateFeatures(Map.of("share.version", new org.apache.kafka.clients.admin.FeatureUpdate((short) 2,
                org.apache.kafka.clients.admin.FeatureUpdate.UpgradeType.UPGRADE))).all(),
                org.apache.kafka.common.errors.InvalidUpdateVersionException.class, "features: share.version 2");
        expectFailure(admin.updateFeatures(Map.of("transaction.version", new org.apache.kafka.clients.admin.FeatureUpdate((short) 1,
                org.apache.kafka.clients.admin.FeatureUpdate.UpgradeType.SAFE_DOWNGRADE))).all(),
                org.apache.kafka.common.errors.InvalidUpdateVersionException.class, "features: transaction.version 1");
        admin.updateFeatures(Map.of("share.version", new org.apache.kafka.clients.admin.FeatureUpdate((short) 0,
                org.apache.kafka.clients.admin.FeatureUpdate.UpgradeType.SAFE_DOWNGRADE))).all().get(30, TimeUnit.SECONDS);
        fm = admin.describeFeatures().featureMetadata().get(30, TimeUnit.SECONDS);
        check(!fm.finalizedFeatures().containsKey("share.version") && fm.finalizedFeaturesEpoch().orElse(-1L) == epoch + 1,
                "features: after the downgrade %s epoch %s, want no share.version at epoch %d", fm.finalizedFeatures(), fm.finalizedFeaturesEpoch(), epoch + 1);
        expectFailure(admin.describeShareGroups(List.of("jsq-multi")).describedGroups().get("jsq-multi"),
                org.apache.kafka.common.errors.UnsupportedVersionException.class, "features: describeShareGroups with share.version 0");
        admin.updateFeatures(Map.of("share.version", new org.apache.kafka.clients.admin.FeatureUpdate((short) 1,
                org.apache.kafka.clients.admin.FeatureUpdate.UpgradeType.UPGRADE))).all().get(30, TimeUnit.SECONDS);
        check(describe("jsq-multi").groupId().equals("jsq-multi"), "features: describeShareGroups after re-enabling");
    }

    interface Cond {
        String failure() throws Exception; // null when the condition holds
    }

    static void waitFor(Cond c, String what) throws Exception {
        long deadline = System.currentTimeMillis() + STEP_MS;
        String last = null;
        while (System.currentTimeMillis() < deadline) {
            try {
                last = c.failure();
            } catch (java.util.concurrent.ExecutionException e) {
                last = e.getCause().toString(); // e.g. the group does not exist yet
            }
            if (last == null) {
                return;
            }
            Thread.sleep(50); // poll interval
        }
        throw new Mismatch(what + ": not true after " + STEP_MS + " ms: " + last);
    }
}
