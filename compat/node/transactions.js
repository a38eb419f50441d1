// kafkajs's transactions: commit, abort, sendOffsets, read_committed.
//
// Usage: node transactions.js <bootstrap> <topic> <group>
//
// A transactional producer commits a transaction of 30 messages ("committed-*") that also
// sends the offset 7 of partition 0 of <topic> for <group> (sendOffsets), aborts one of 30
// ("aborted-*") and commits another of 30 ("committed-again-*"). A read_committed consumer
// must read exactly the 60 committed messages; a read_uncommitted one must read all 90. The
// offset sent in the committed transaction must be <group>'s committed offset. Prints "OK:
// kafkajs transactions", or a "FAIL:" line and exits 1.
'use strict';

const h = require('./harness');

const DEADLINE_MS = 60000;

async function main(bootstrap, topic, group) {
  const deadline = Date.now() + DEADLINE_MS;
  const kafka = h.client(bootstrap, 'exactq-compat-kafkajs-txn');
  const p = h.producer(kafka, { transactionalId: `${topic}-txn`, idempotent: true, maxInFlightRequests: 1 });
  await p.connect();
  const transaction = async (tag, end, offsets) => {
    const tx = await p.transaction();
    try {
      const msgs = [];
      for (let i = 0; i < 30; i++) msgs.push({ key: `${tag}-${i}`, value: `${tag}-${i}` });
      await tx.send({ topic, messages: msgs });
      if (offsets) await tx.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: offsets }] });
    } catch (e) {
      await tx.abort();
      throw e;
    }
    await (end === 'commit' ? tx.commit() : tx.abort());
  };
  await transaction('committed', 'commit', [{ partition: 0, offset: '7' }]);
  await transaction('aborted', 'abort');
  await transaction('committed-again', 'commit');
  await p.disconnect();

  const read = async (readUncommitted, want) => {
    const got = new Set();
    await h.consumeAll(kafka, {
      group: `${group}-reader-${readUncommitted}`, topic, deadline, readUncommitted,
      done: () => got.size === want,
      onMessage: (partition, m) => {
        const v = m.value.toString();
        h.check(readUncommitted || !v.startsWith('aborted-'), `read_committed consumer read ${v} of the aborted transaction`);
        h.check(!got.has(v), `${v} read twice`);
        got.add(v);
      },
    });
    return got;
  };
  await read(false, 60);
  await read(true, 90);

  const admin = kafka.admin();
  await admin.connect();
  try {
    const offs = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    const p0 = offs[0].partitions.find((x) => x.partition === 0);
    h.check(p0 && p0.offset === '7', `fetchOffsets ${group}: ${JSON.stringify(offs)}, want partition 0 at 7`);
  } finally {
    await admin.disconnect();
  }
}

h.run(main, 'usage: node transactions.js <bootstrap> <topic> <group>', 'OK: kafkajs transactions');
