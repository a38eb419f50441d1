"""An idempotent acks=all Producer of confluent-kafka (librdkafka), read back record by record.

Usage: python producer.py <bootstrap> <topic> <partitions> <records>

The Producer (enable.idempotence, acks=all, lz4, small batches so one run sends many) writes
<records> keyed records with a header each; every delivery report must succeed and name a
partition and offset. An assign()ed Consumer then reads every partition from the beginning
to its end: each record must be at the partition and offset its delivery report gave, with
its key, value and header, and each must be read exactly once. Prints "OK: confluent-kafka
producer" on success, or a "FAIL:" line and exits 1.
"""

import time

from confluent_kafka import Consumer, Producer, TopicPartition

import harness

DEADLINE_S = 60


def main(bootstrap, topic, partitions, records):
    partitions, records = int(partitions), int(records)
    deadline = time.time() + DEADLINE_S
    p = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": "lz4",
        "linger.ms": 5,
        "batch.num.messages": 100,
    })
    delivered, errors = {}, []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered[msg.key()] = (msg.partition(), msg.offset())

    for i in range(records):
        key = f"key-{i:06d}".encode()
        p.produce(topic, key=key, value=b"value-%06d" % i, headers=[("n", b"%d" % i)], on_delivery=report)
        p.poll(0)
    if p.flush(30) != 0:
        raise RuntimeError("flush left records undelivered")
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, the first {errors[0]}")
    if len(delivered) != records:
        raise RuntimeError(f"{len(delivered)} delivery reports for {records} records")

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only", "enable.auto.commit": False})
    ends = {}
    for part in range(partitions):
        _, hi = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
        ends[part] = hi
    c.assign([TopicPartition(topic, part, 0) for part in range(partitions)])
    read = {}
    while sum(ends.values()) > len(read):
        if time.time() > deadline:
            raise RuntimeError(f"read {len(read)} of {sum(ends.values())} records")
        for m in harness.messages(c.consume(num_messages=500, timeout=0.2)):
            if m.key() in read:
                raise RuntimeError(f"record {m.key()} read twice, at {read[m.key()]} and {(m.partition(), m.offset())}")
            read[m.key()] = (m.partition(), m.offset())
            i = int(m.key().split(b"-")[1])
            if m.value() != b"value-%06d" % i or m.headers() != [("n", b"%d" % i)]:
                raise RuntimeError(f"record {m.key()}: value {m.value()} headers {m.headers()}")
    c.close()
    if read != delivered:
        wrong = [k for k in delivered if read.get(k) != delivered[k]]
        raise RuntimeError(f"{len(wrong)} records not where their delivery report put them, e.g. {wrong[:3]}")
    if sum(ends.values()) != records:
        raise RuntimeError(f"end offsets {ends} sum to {sum(ends.values())}, want {records}")


if __name__ == "__main__":
    harness.run(main, __doc__, "OK: confluent-kafka producer")
