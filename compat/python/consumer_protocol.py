"""KIP-848 consumer groups (group.protocol=consumer) with confluent-kafka (librdkafka).

Usage: python consumer_protocol.py <bootstrap> <topic> <group> <records> <partitions>

Three Consumers in one consumer-protocol group subscribe to the topic, each committing
what it polls (synchronously); once their assignments are non-empty, disjoint and cover
every partition and every record was seen, one closes (its leave) and the other two must
take every partition over. Prints "OK: confluent-kafka consumer protocol" on success, or
a "FAIL:" line and exits 1.
"""

import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException

DEADLINE_S = 120


class Member(threading.Thread):
    def __init__(self, bootstrap, topic, group, i, seen, lock):
        super().__init__(daemon=True)
        self.conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": f"exactq-compat-py-848-{i}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        self.topic, self.seen, self.lock = topic, seen, lock
        self.assignment = set()
        self.stop = False
        self.error = None

    def run(self):
        try:
            c = Consumer(self.conf)
            c.subscribe([self.topic])
            while not self.stop:
                msgs = c.consume(num_messages=500, timeout=0.1)
                got = []
                for m in msgs:
                    if m.error():
                        raise KafkaException(m.error())
                    got.append(m.value())
                if got:
                    with self.lock:
                        self.seen.update(got)
                    c.commit(asynchronous=False)
                self.assignment = {(tp.topic, tp.partition) for tp in c.assignment()}
            c.close()
        except Exception as e:  # reported by the main thread
            self.error = e


def covers(members, partitions):
    union, total = set(), 0
    for m in members:
        if not m.assignment:
            return False
        union |= m.assignment
        total += len(m.assignment)
    return total == partitions and len(union) == partitions


def wait_for(what, deadline, members, ok):
    while not ok():
        for m in members:
            if m.error is not None:
                raise RuntimeError(f"consumer failed while waiting for {what}: {m.error}")
        if time.time() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def main(bootstrap, topic, group, records, partitions):
    deadline = time.time() + DEADLINE_S
    seen, lock = set(), threading.Lock()
    members = [Member(bootstrap, topic, group, i, seen, lock) for i in range(3)]
    for m in members:
        m.start()
    try:
        wait_for("three members covering every partition and every record", deadline, members,
                 lambda: covers(members, partitions) and len(seen) == records)
        gone = members.pop()
        gone.stop = True
        gone.join(30)
        if gone.error is not None:
            raise RuntimeError(f"closing a consumer failed: {gone.error}")
        wait_for("two members covering every partition", deadline, members, lambda: covers(members, partitions))
    finally:
        for m in members:
            m.stop = True
        for m in members:
            m.join(30)
    for m in members:
        if m.error is not None:
            raise RuntimeError(f"consumer failed: {m.error}")


if __name__ == "__main__":
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    except Exception as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
    print("OK: confluent-kafka consumer protocol")
