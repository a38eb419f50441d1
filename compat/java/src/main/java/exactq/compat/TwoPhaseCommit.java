package exactq.compat;

import static exactq.compat.Checks.check;

import exactq.compat.Checks.Mismatch;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.PreparedTxnState;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.internals.Sender;
import org.apache.kafka.clients.producer.internals.TransactionManager;
import org.apache.kafka.clients.producer.internals.TransactionalRequestResult;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.requests.InitProducerIdRequest;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.internals.ProducerIdAndEpoch;

/**
 * KIP-939 two-phase commit with the reference Java client against exactq (broker with
 * transaction.two.phase.commit.enable=true). Usage: {@code java -cp ... exactq.compat.TwoPhaseCommit
 * <bootstrap> <topic> <transactional.id prefix>}.
 *
 * <p>Commit: a KafkaProducer with transaction.two.phase.commit.enable=true runs
 * initTransactions(false), beginTransaction(), sends records and prepareTransaction(), then
 * disappears without ending the transaction (close(Duration.ZERO): a graceful close would
 * abort it). A second KafkaProducer with the same transactional.id calls
 * initTransactions(true) (keepPreparedTxn), which exactq implements (Kafka 4.4 answers
 * UNSUPPORTED_VERSION), and completeTransaction(state) commits. Abort: the same, with
 * completeTransaction given a state that is not the prepared one. A read_committed
 * KafkaConsumer then sees each committed record exactly once and no aborted one.
 *
 * <p>The released kafka-clients 4.4.0 cannot run two-phase commit on its own. It has
 * KIP-939's client machinery (the transaction.two.phase.commit.enable config,
 * TransactionManager.initializeTransactions(keep), prepareTransaction(),
 * preparedTransactionState(), and the handling of a v6 response that reports a kept
 * transaction) but: (1) not the public KafkaProducer methods initTransactions(boolean),
 * prepareTransaction() and completeTransaction(PreparedTxnState) of the 4.4 sources; (2) its
 * TransactionManager never sets Enable2Pc or KeepPreparedTxn on the InitProducerId request;
 * (3) it marks InitProducerId v6, the only version that carries them, unstable and never
 * sends it; (4) after initTransactions(true) recovered a transaction, commitTransaction()
 * and abortTransaction() end it locally without sending EndTxn (TransactionManager's
 * transactionStarted is still false; the 4.4 sources have the same bug). {@link TwoPC}
 * fills these gaps by reflection: it calls the TransactionManager as the sources'
 * KafkaProducer methods do, sets the two request fields the sources set, turns the unstable
 * flag off (printing "V6_UNLOCKED") and marks a recovered transaction started. The request
 * and response encoding, the client's state machine and every other request are
 * kafka-clients' own.
 *
 * <p>Prints "OK: Java 2PC" on success; exits 1 with a "FAIL:" line otherwise.
 */
public final class TwoPhaseCommit {
    static final int N = 5;

    public static void main(String[] args) {
        Checks.main(args, 3, "TwoPhaseCommit <bootstrap> <topic> <transactional.id prefix>", "OK: Java 2PC",
                () -> run(args[0], args[1], args[2]));
    }

    /** Lets the client send InitProducerId v6 (see the class comment). */
    static void unlockInitProducerIdV6() throws ReflectiveOperationException {
        if (ApiKeys.INIT_PRODUCER_ID.latestVersion(false) >= 6) {
            return;
        }
        Field f = ApiMessageType.class.getDeclaredField("latestVersionUnstable");
        f.setAccessible(true);
        f.setBoolean(ApiMessageType.INIT_PRODUCER_ID, false);
        check(ApiKeys.INIT_PRODUCER_ID.latestVersion(false) >= 6, "InitProducerId v6 still unstable after unlocking");
        System.out.println("V6_UNLOCKED");
    }

    /**
     * A 2PC producer: KafkaProducer plus the KIP-939 methods of the 4.4 sources
     * (KafkaProducer.initTransactions(boolean), prepareTransaction(), completeTransaction()),
     * written against the same TransactionManager calls.
     */
    static final class TwoPC implements AutoCloseable {
        final KafkaProducer<byte[], byte[]> p;
        final TransactionManager tm;
        final Sender sender;

        TwoPC(KafkaProducer<byte[], byte[]> p) throws ReflectiveOperationException {
            this.p = p;
            this.tm = (TransactionManager) field(p, "transactionManager");
            this.sender = (Sender) field(p, "sender");
        }

        static Object field(Object o, String name) throws ReflectiveOperationException {
            Field f = o.getClass().getDeclaredField(name);
            f.setAccessible(true);
            return f.get(o);
        }

        void initTransactions(boolean keepPreparedTxn) throws ReflectiveOperationException {
            TransactionalRequestResult r;
            // The sender takes requests under the TransactionManager's lock: holding it, the
            // InitProducerId just queued cannot leave before its KIP-939 fields are set.
            synchronized (tm) {
                r = tm.initializeTransactions(keepPreparedTxn);
                int found = 0;
                for (Object h : (PriorityQueue<?>) field(tm, "pendingRequests")) {
                    if (h.getClass().getSimpleName().equals("InitProducerIdHandler")) {
                        InitProducerIdRequest.Builder b = (InitProducerIdRequest.Builder) field(h, "builder");
                        b.data.setEnable2Pc(tm.is2PCEnabled()).setKeepPreparedTxn(keepPreparedTxn);
                        found++;
                    }
                }
                check(found == 1, "%d InitProducerId requests queued", found);
            }
            sender.wakeup();
            r.await(30, TimeUnit.SECONDS, "initTransactions(" + keepPreparedTxn + ")");
            tm.maybeUpdateTransactionV2Enabled(true);
            if (tm.isPrepared()) {
                // Gap (4): the recovered transaction is open on the coordinator, so ending it
                // must send EndTxn.
                Field started = TransactionManager.class.getDeclaredField("transactionStarted");
                started.setAccessible(true);
                started.setBoolean(tm, true);
            }
        }

        PreparedTxnState prepareTransaction() {
            check(tm.is2PCEnabled(), "transaction.two.phase.commit.enable not in effect");
            p.flush();
            tm.prepareTransaction();
            return state(tm.preparedTransactionState());
        }

        boolean completeTransaction(PreparedTxnState want) {
            if (!tm.isPrepared()) {
                throw new InvalidTxnStateException("no transaction prepared");
            }
            if (state(tm.preparedTransactionState()).equals(want)) {
                p.commitTransaction();
                return true;
            }
            p.abortTransaction();
            return false;
        }

        static PreparedTxnState state(ProducerIdAndEpoch pe) {
            return new PreparedTxnState(pe.producerId + ":" + pe.epoch);
        }

        @Override
        public void close() {
            p.close();
        }
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.TRANSACTION_TWO_PHASE_COMMIT_ENABLE_CONFIG, "true");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Prepares a transaction of N records tag-0..tag-(N-1) and abandons its producer. Returns
     * the prepared state.
     */
    static PreparedTxnState prepareAndCrash(String bootstrap, String topic, String txnId, String tag) throws Exception {
        KafkaProducer<byte[], byte[]> kp = producer(bootstrap, txnId);
        try {
            TwoPC p = new TwoPC(kp);
            p.initTransactions(false);
            kp.beginTransaction();
            for (int i = 0; i < N; i++) {
                kp.send(new ProducerRecord<>(topic, 0, b(tag + "-" + i), b(tag + "-" + i)));
            }
            PreparedTxnState st = p.prepareTransaction();
            check(st.hasTransaction() && !st.toString().isEmpty(), "%s: prepareTransaction gave %s", tag, st);
            System.out.println("PREPARED " + tag + " " + st);
            return new PreparedTxnState(st.toString()); // through its text form, as a checkpoint stores it
        } finally {
            kp.close(Duration.ZERO); // forced: no EndTxn, as if the process died
        }
    }

    /**
     * Recovers txnId's prepared transaction with a new producer (InitProducerId v6 with
     * KeepPreparedTxn), checks that it is the one prepared, and completes it with want.
     */
    static TwoPC recoverAndComplete(String bootstrap, String txnId, PreparedTxnState prepared, PreparedTxnState want) throws Exception {
        TwoPC p = new TwoPC(producer(bootstrap, txnId));
        p.initTransactions(true);
        check(p.tm.isPrepared(), "%s: initTransactions(true) did not recover a prepared transaction", txnId);
        PreparedTxnState recovered = TwoPC.state(p.tm.preparedTransactionState());
        check(recovered.equals(prepared), "%s: recovered %s, prepared %s", txnId, recovered, prepared);
        boolean committed = p.completeTransaction(want);
        check(committed == want.equals(prepared), "%s: completeTransaction(%s) committed=%s", txnId, want, committed);
        try {
            p.completeTransaction(want);
            throw new Mismatch(txnId + ": second completeTransaction accepted");
        } catch (InvalidTxnStateException expected) {
            // nothing prepared any more
        }
        System.out.println((committed ? "COMMITTED " : "ABORTED ") + txnId + " " + recovered);
        return p;
    }

    static void run(String bootstrap, String topic, String prefix) throws Exception {
        unlockInitProducerIdV6();

        // Commit: the recovered transaction is completed with the state it was prepared with.
        PreparedTxnState committed = prepareAndCrash(bootstrap, topic, prefix + "-c", "c");
        recoverAndComplete(bootstrap, prefix + "-c", committed, committed).close();

        // Abort: completed with a state that is not the prepared one.
        PreparedTxnState aborted = prepareAndCrash(bootstrap, topic, prefix + "-a", "a");
        PreparedTxnState other = new PreparedTxnState(aborted.producerId() + ":" + (aborted.epoch() + 1));
        try (TwoPC p = recoverAndComplete(bootstrap, prefix + "-a", aborted, other)) {
            // The recovered producer goes on with ordinary transactions: an end marker.
            p.p.beginTransaction();
            p.p.send(new ProducerRecord<>(topic, 0, b("end"), b("end")));
            p.p.commitTransaction();
        }

        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Map<String, Integer> seen = new HashMap<>();
        List<String> order = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 60_000;
            while (!seen.containsKey("end")) {
                check(System.currentTimeMillis() < deadline, "read_committed did not reach the end marker; saw %s", order);
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    String v = new String(r.value(), StandardCharsets.UTF_8);
                    seen.merge(v, 1, Integer::sum);
                    order.add(v);
                }
            }
        }
        for (int i = 0; i < N; i++) {
            check(seen.getOrDefault("c-" + i, 0) == 1, "committed c-%d seen %d times: %s", i, seen.getOrDefault("c-" + i, 0), order);
            check(!seen.containsKey("a-" + i), "aborted a-%d visible to read_committed: %s", i, order);
        }
        check(seen.size() == N + 1, "read_committed saw %s", order);
        System.out.println("READ " + order);
    }
}
