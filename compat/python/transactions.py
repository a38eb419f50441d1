"""A confluent-kafka (librdkafka) consume-transform-produce pipeline with transactions.

Usage: python transactions.py <bootstrap> <input> <output> <group> <records>

A read_committed Consumer of <group> reads <input>; a transactional Producer writes each
record's value, upper-cased and prefixed "T:", to <output>, and sends the consumer's
positions with send_offsets_to_transaction. The first transaction also writes an
"ABORTED:" copy of its records and is aborted; the consumer rewinds to its committed
offsets and the work is done again in transactions that commit, until every input record was
transformed. Prints "OK: confluent-kafka transactions" with the number of committed and
aborted transactions, or a "FAIL:" line and exits 1. The Go test checks the output topic
with a read_committed and a read_uncommitted reader.
"""

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

import harness

DEADLINE_S = 90


def main(bootstrap, input_topic, output_topic, group, records):
    records = int(records)
    deadline = time.time() + DEADLINE_S
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
    })
    p = Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": f"{group}-txn",
        "transaction.timeout.ms": 30000,
    })
    p.init_transactions(30)
    c.subscribe([input_topic])
    done, committed, aborted = set(), 0, 0
    while len(done) < records:
        if time.time() > deadline:
            raise RuntimeError(f"transformed {len(done)} of {records} records")
        batch = [m.value() for m in harness.messages(c.consume(num_messages=100, timeout=0.2))]
        if not batch:
            continue
        p.begin_transaction()
        for v in batch:
            p.produce(output_topic, value=b"T:" + v.upper())
            if aborted == 0:
                p.produce(output_topic, value=b"ABORTED:" + v)
        positions = c.position(c.assignment())
        p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 30)
        if aborted == 0:
            # Delivered first: abort_transaction purges what is still queued, and the
            # aborted records must reach the log for the check to mean anything.
            if p.flush(30) != 0:
                raise RuntimeError("flush left records of the transaction to abort undelivered")
            p.abort_transaction(30)
            aborted += 1
            rewind = c.committed(c.assignment(), timeout=10)
            for tp in rewind:
                start = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                c.seek(TopicPartition(tp.topic, tp.partition, start))
            continue
        p.commit_transaction(30)
        committed += 1
        done.update(batch)
    c.close()
    print(f"{committed} transactions committed, {aborted} aborted")


if __name__ == "__main__":
    harness.run(main, __doc__, "OK: confluent-kafka transactions")
