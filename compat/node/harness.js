// Shared pieces of the kafkajs scripts of compat/: a client for the bootstrap address that
// logs only errors, polling for a condition under a deadline, and the exit convention the Go
// tests read (an "OK: ..." line on success, a "FAIL: ..." line and exit 1).
'use strict';

const { Kafka, logLevel, Partitioners } = require('kafkajs');

function client(bootstrap, clientId) {
  return new Kafka({ clientId, brokers: [bootstrap], logLevel: logLevel.ERROR, retry: { retries: 3 } });
}

// A producer with kafkajs's default partitioner (murmur2 on the key, as Java's), named so
// that kafkajs does not warn about its changed default.
function producer(kafka, opts) {
  return kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, ...opts });
}

// waitFor polls ok() until it is true; it throws when failed() is set or the deadline passed.
async function waitFor(what, deadline, ok, failed = () => null) {
  while (!ok()) {
    const err = failed();
    if (err) throw new Error(`failed while waiting for ${what}: ${err.stack || err}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// consumeAll runs a consumer of group on topic (from the beginning, or from the group's
// commits) and calls onMessage for every message until done() is true, then disconnects;
// kafkajs commits what it consumed after every batch.
async function consumeAll(kafka, { group, topic, deadline, done, onMessage, readUncommitted = false }) {
  const c = kafka.consumer({ groupId: group, readUncommitted, maxWaitTimeInMs: 100, heartbeatInterval: 500 });
  let failed = null;
  await c.connect();
  await c.subscribe({ topics: [topic], fromBeginning: true });
  await c.run({
    eachMessage: async ({ partition, message }) => {
      try {
        onMessage(partition, message);
      } catch (e) {
        failed = e;
      }
    },
  });
  try {
    await waitFor(`group ${group} consuming ${topic}`, deadline, done, () => failed);
  } finally {
    await c.disconnect();
  }
}

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

function run(main, usage, ok) {
  const args = process.argv.slice(2);
  if (args.length !== main.length) {
    console.error(usage);
    process.exit(2);
  }
  main(...args).then(
    (extra) => {
      if (extra) console.log(extra);
      console.log(ok);
      process.exit(0);
    },
    (e) => {
      console.error(`FAIL: ${e.stack || e}`);
      process.exit(1);
    },
  );
}

module.exports = { client, producer, waitFor, consumeAll, check, run };
