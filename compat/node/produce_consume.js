// kafkajs's idempotent producer and a consumer group that commits.
//
// Usage: node produce_consume.js <bootstrap> <topic> <group> <records>
//
// An idempotent producer (acks=all, one request in flight) sends <records> keyed messages in
// batches of 100; every send must report a base offset per partition. A consumer of <group>
// then reads the topic from the beginning: every message must be read exactly once, at the
// partition and offset its send reported, with its key, value and header. It disconnects
// (kafkajs has committed after every batch); the producer sends 50 more messages, and a new
// consumer of the same group must read exactly those 50: the group's commits held. Prints
// "OK: kafkajs produce and consume", or a "FAIL:" line and exits 1.
'use strict';

const h = require('./harness');

const DEADLINE_MS = 60000;

async function main(bootstrap, topic, group, records) {
  const n = Number(records);
  const deadline = Date.now() + DEADLINE_MS;
  const kafka = h.client(bootstrap, 'exactq-compat-kafkajs');
  const p = h.producer(kafka, { idempotent: true, maxInFlightRequests: 1 });
  await p.connect();
  const where = new Map(); // key -> "partition/offset" the send reported
  const send = async (from, to, tag) => {
    for (let i = from; i < to; i += 100) {
      const msgs = [];
      for (let j = i; j < Math.min(to, i + 100); j++) {
        msgs.push({ key: `${tag}-${j}`, value: `value-${tag}-${j}`, headers: { n: String(j) } });
      }
      const meta = await p.send({ topic, acks: -1, messages: msgs });
      // Each partition's messages of one send are one batch, in the order sent.
      const next = new Map(meta.map((m) => {
        h.check(m.errorCode === 0, `send: ${JSON.stringify(m)}`);
        return [m.partition, BigInt(m.baseOffset)];
      }));
      where.set(i, { msgs, meta, next });
    }
  };
  await send(0, n, 'first');

  // Which partition each message went to is learnt from the consumer.
  const seen = new Map();
  await h.consumeAll(kafka, {
    group, topic, deadline,
    done: () => seen.size === n,
    onMessage: (partition, m) => {
      const key = m.key.toString();
      h.check(!seen.has(key), `message ${key} read twice`);
      h.check(m.value.toString() === `value-${key}` && m.headers.n.toString() === key.split('-')[1], `message ${key}: ${m.value} ${JSON.stringify(m.headers)}`);
      seen.set(key, `${partition}/${m.offset}`);
    },
  });
  // The expected offsets: within one send, a partition's messages follow its base offset.
  for (const { msgs, next } of where.values()) {
    for (const m of msgs) {
      const [part, off] = seen.get(m.key).split('/');
      const want = next.get(Number(part));
      h.check(want !== undefined && BigInt(off) === want, `message ${m.key} at ${part}/${off}, its send reported partition ${part} from ${want}`);
      next.set(Number(part), want + 1n);
    }
  }

  where.clear();
  await send(0, 50, 'late');
  await p.disconnect();
  const again = new Set();
  await h.consumeAll(kafka, {
    group, topic, deadline,
    done: () => again.size === 50,
    onMessage: (partition, m) => {
      const key = m.key.toString();
      h.check(key.startsWith('late-'), `the group's second consumer read ${key} again: its commits were lost`);
      h.check(!again.has(key), `message ${key} read twice`);
      again.add(key);
    },
  });
}

h.run(main, 'usage: node produce_consume.js <bootstrap> <topic> <group> <records>', 'OK: kafkajs produce and consume');
