"""A classic consumer group (group.protocol=classic) of two confluent-kafka Consumers,
committing across a rebalance.

Usage: python classic_group.py <bootstrap> <topic> <group> <records> <partitions>

The topic already holds <records> records. Consumer A joins alone, reads and commits (synchronously,
after every batch) the records already there; consumer B joins, and the rebalance must split
the partitions between them. The script then produces as many records again (values
"late-..."); both consumers read and commit until every record was read. No record may be
read twice (every batch is committed before the next poll, so a partition's new owner starts
where its old one stopped), and both consumers must read some of the late records. Prints
"OK: confluent-kafka classic group" on success, or a "FAIL:" line and exits 1.
"""

import collections
import threading
import time

from confluent_kafka import Producer

import harness

DEADLINE_S = 90


class Member(harness.GroupConsumer):
    batch = 50

    def __init__(self, bootstrap, topic, group, name, seen, lock):
        super().__init__(name, bootstrap, group, {
            "group.protocol": "classic",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
        }, topic, seen, lock)


def main(bootstrap, topic, group, records, partitions):
    records, partitions = int(records), int(partitions)
    deadline = time.time() + DEADLINE_S
    seen, lock = collections.defaultdict(list), threading.Lock()
    a = Member(bootstrap, topic, group, "a", seen, lock)
    b = Member(bootstrap, topic, group, "b", seen, lock)
    members = [a]
    try:
        a.start()
        harness.wait_for("consumer a alone reading the records already there", deadline,
                         lambda: len(a.assignment) == partitions and len(seen) == records, members)
        members.append(b)
        b.start()
        harness.wait_for("the rebalance splitting the partitions between a and b", deadline,
                         lambda: a.assignment and b.assignment and not (a.assignment & b.assignment)
                         and len(a.assignment | b.assignment) == partitions, members)
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(records):
            p.produce(topic, key=f"late-{i}".encode(), value=b"late-%06d" % i)
        if p.flush(30) != 0:
            raise RuntimeError("flush left late records undelivered")
        harness.wait_for("every record read", deadline, lambda: len(seen) == 2 * records, members)
    finally:
        for m in members:
            m.stop = True
    harness.stop_all(members)
    harness.once_each(seen, "read")
    late = collections.Counter(who[0] for v, who in seen.items() if v.startswith(b"late-"))
    if late["a"] == 0 or late["b"] == 0:
        raise RuntimeError(f"late records read by {dict(late)}: want both consumers to read some")
    if a.rebalances < 2:
        raise RuntimeError(f"consumer a was assigned {a.rebalances} times, want a rebalance when b joined")


if __name__ == "__main__":
    harness.run(main, __doc__, "OK: confluent-kafka classic group")
