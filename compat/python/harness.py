"""Shared pieces of the confluent-kafka scripts of compat/: worker threads whose failure is
reported by the main thread, polling for a condition under a deadline, and the exit
convention the Go tests read (an "OK: ..." line on success, a "FAIL: ..." line and exit 1).
"""

import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException


class Worker(threading.Thread):
    """A thread running self.work() until self.stop; an exception is kept in self.error."""

    def __init__(self, name):
        super().__init__(daemon=True, name=name)
        self.stop = False
        self.error = None

    def run(self):
        try:
            self.work()
        except Exception as e:  # reported by the main thread
            self.error = e

    def work(self):
        raise NotImplementedError


class Member(Worker):
    """A consumer thread of a group: its client is configured with the bootstrap servers,
    the group, a client.id naming it, and extra. Each batch it takes (take()) and commits
    (commit()) is added to seen (a record -> the names of the members that received it),
    shared by every member under lock; assignment is its last assignment (assigned())."""

    def __init__(self, name, bootstrap, group, extra, topic, seen, lock):
        super().__init__(name)
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"exactq-compat-py-{name}", **extra}
        self.topic, self.seen, self.lock = topic, seen, lock
        self.assignment = set()
        self.count = 0

    def work(self):
        c = self.open()
        while not self.stop:
            got = self.take(c)
            if got:
                self.commit(c)
                with self.lock:
                    for r in got:
                        self.seen[r].append(self.name)
                self.count += len(got)
            self.assignment = self.assigned(c)
        c.close()

    def assigned(self, c):
        return set()


class GroupConsumer(Member):
    """A Member with a Consumer of a classic or consumer-protocol group, taking up to batch
    values a poll and committing them synchronously before the next; rebalances counts its
    assignments."""

    batch = 500

    def __init__(self, *args):
        super().__init__(*args)
        self.rebalances = 0

    def on_assign(self, consumer, partitions):
        self.rebalances += 1

    def open(self):
        c = Consumer(self.conf)
        c.subscribe([self.topic], on_assign=self.on_assign)
        return c

    def take(self, c):
        return [m.value() for m in messages(c.consume(num_messages=self.batch, timeout=0.1))]

    def commit(self, c):
        c.commit(asynchronous=False)

    def assigned(self, c):
        return {tp.partition for tp in c.assignment()}


def messages(batch):
    """The messages of a consume() or poll() batch; raises the first error among them."""
    for m in batch:
        if m.error():
            raise KafkaException(m.error())
    return list(batch)


def once_each(seen, what):
    """Raises unless every record of seen was received by exactly one member."""
    twice = {r: who for r, who in seen.items() if len(who) != 1}
    if twice:
        raise RuntimeError(f"{len(twice)} records {what} more than once, e.g. {list(twice.items())[:3]}")


def check(workers):
    for w in workers:
        if w.error is not None:
            raise RuntimeError(f"{w.name} failed: {w.error!r}")


def wait_for(what, deadline, ok, workers=()):
    """Polls ok() until it is true; fails when a worker failed or the deadline passed."""
    while not ok():
        check(workers)
        if time.time() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def stop_all(workers):
    for w in workers:
        w.stop = True
    for w in workers:
        w.join(30)
        if w.is_alive():
            raise RuntimeError(f"{w.name} did not stop")
    check(workers)


def run(main, doc, ok):
    """Calls main with the command-line arguments (as many as it takes) and exits as the Go
    tests expect."""
    nargs = main.__code__.co_argcount
    if len(sys.argv) != nargs + 1:
        print(doc, file=sys.stderr)
        sys.exit(2)
    try:
        main(*sys.argv[1:])
    except Exception as e:
        print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
    print(ok)
