"""Two confluent-kafka (librdkafka 2.16) ShareConsumers in one share group (KIP-932).

Usage: python share_consumer.py <bootstrap> <topic> <group> <records>

The topic holds <records> records and the group's share.auto.offset.reset is earliest. Two
ShareConsumers in explicit acknowledgement mode poll, acknowledge every record (ACCEPT) and
commit_sync their acknowledgements, which must all succeed, until every record was received.
Every record must be delivered exactly once across the two (accepted records are never
redelivered), each with delivery count 1 where the message has one; then both close. Prints
"OK: confluent-kafka share consumer" with each consumer's count, or a "FAIL:" line and
exits 1.
"""

import collections
import threading
import time

from confluent_kafka import AcknowledgeType, ShareConsumer

import harness

DEADLINE_S = 60


class Member(harness.Member):
    def __init__(self, bootstrap, group, topic, name, seen, lock):
        super().__init__(f"share-{name}", bootstrap, group, {"share.acknowledgement.mode": "explicit"}, topic, seen, lock)

    def open(self):
        c = ShareConsumer(self.conf)
        c.subscribe([self.topic])
        return c

    def take(self, c):
        got = []
        for m in harness.messages(c.poll(0.2)):
            c.acknowledge(m, AcknowledgeType.ACCEPT)
            got.append((m.partition(), m.offset(), m.value()))
        return got

    def commit(self, c):
        failed = {tp: e for tp, e in c.commit_sync(30).items() if e is not None}
        if failed:
            raise RuntimeError(f"acknowledgements refused: {failed}")


def main(bootstrap, topic, group, records):
    records = int(records)
    deadline = time.time() + DEADLINE_S
    seen, lock = collections.defaultdict(list), threading.Lock()
    members = [Member(bootstrap, group, topic, n, seen, lock) for n in ("a", "b")]
    for m in members:
        m.start()
    try:
        harness.wait_for("every record received", deadline, lambda: len(seen) >= records, members)
    finally:
        for m in members:
            m.stop = True
    harness.stop_all(members)
    harness.once_each(seen, "delivered")
    values = sorted(v for (_, _, v) in seen)
    if values != sorted(b"value-%06d" % i for i in range(records)):
        raise RuntimeError(f"received {len(values)} records, not the {records} produced")
    print("received: " + ", ".join(f"{m.name} {m.count}" for m in members))


if __name__ == "__main__":
    harness.run(main, __doc__, "OK: confluent-kafka share consumer")
