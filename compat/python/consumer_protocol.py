"""KIP-848 consumer groups (group.protocol=consumer) with confluent-kafka (librdkafka).

Usage: python consumer_protocol.py <bootstrap> <topic> <group> <records> <partitions>

Three Consumers in one consumer-protocol group subscribe to the topic, each committing
what it polls (synchronously); once their assignments are non-empty, disjoint and cover
every partition and every record was seen, one closes (its leave) and the other two must
take every partition over. Prints "OK: confluent-kafka consumer protocol" on success, or
a "FAIL:" line and exits 1.
"""

import collections
import threading
import time

import harness

DEADLINE_S = 120


class Member(harness.GroupConsumer):
    def __init__(self, bootstrap, topic, group, i, seen, lock):
        super().__init__(f"848-{i}", bootstrap, group, {
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }, topic, seen, lock)


def covers(members, partitions):
    union, total = set(), 0
    for m in members:
        if not m.assignment:
            return False
        union |= m.assignment
        total += len(m.assignment)
    return total == partitions and len(union) == partitions


def main(bootstrap, topic, group, records, partitions):
    records, partitions = int(records), int(partitions)
    deadline = time.time() + DEADLINE_S
    seen, lock = collections.defaultdict(list), threading.Lock()
    members = [Member(bootstrap, topic, group, i, seen, lock) for i in range(3)]
    for m in members:
        m.start()
    try:
        harness.wait_for("three members covering every partition and every record", deadline,
                         lambda: covers(members, partitions) and len(seen) == records, members)
        gone = members.pop()
        harness.stop_all([gone])
        harness.wait_for("two members covering every partition", deadline,
                         lambda: covers(members, partitions), members)
    finally:
        for m in members:
            m.stop = True
    harness.stop_all(members)


if __name__ == "__main__":
    harness.run(main, __doc__, "OK: confluent-kafka consumer protocol")
