// kafkajs's admin client: createTopics, fetchTopicMetadata, describeConfigs, createPartitions,
// deleteTopics.
//
// Usage: node admin.js <bootstrap> <topic>
//
// Creates <topic> with 3 partitions and retention.ms=3600000, then checks that
// fetchTopicMetadata lists its 3 partitions led by one broker, that describeConfigs reports
// retention.ms 3600000 (not a default) and cleanup.policy delete (a default), and the
// broker's message.max.bytes; grows it to 5 partitions; deletes it. Prints "OK: kafkajs
// admin", or a "FAIL:" line and exits 1.
'use strict';

const { ConfigResourceTypes } = require('kafkajs');
const h = require('./harness');

async function main(bootstrap, topic) {
  const admin = h.client(bootstrap, 'exactq-compat-kafkajs-admin').admin();
  await admin.connect();
  try {
    const created = await admin.createTopics({
      waitForLeaders: true,
      topics: [{ topic, numPartitions: 3, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
    });
    h.check(created === true, `createTopics returned ${created}, want true (created)`);
    h.check((await admin.listTopics()).includes(topic), 'listTopics lacks the topic');

    const partitionsOf = async () => {
      const md = await admin.fetchTopicMetadata({ topics: [topic] });
      h.check(md.topics.length === 1 && md.topics[0].name === topic, `fetchTopicMetadata: ${JSON.stringify(md)}`);
      for (const p of md.topics[0].partitions) {
        h.check(p.partitionErrorCode === 0 && p.leader >= 0 && p.replicas.length === 1 && p.isr.length === 1,
          `fetchTopicMetadata partition ${JSON.stringify(p)}`);
      }
      return md.topics[0].partitions.map((p) => p.partitionId).sort();
    };
    h.check(JSON.stringify(await partitionsOf()) === '[0,1,2]', 'fetchTopicMetadata: want partitions 0, 1, 2');

    const cfg = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [
        { type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['retention.ms', 'cleanup.policy'] },
        { type: ConfigResourceTypes.BROKER, name: '1', configNames: ['message.max.bytes'] },
      ],
    });
    const entry = (res, name) => {
      const r = cfg.resources.find((x) => x.resourceName === res);
      h.check(r && r.errorCode === 0, `describeConfigs ${res}: ${JSON.stringify(r)}`);
      const e = r.configEntries.find((x) => x.configName === name);
      h.check(e, `describeConfigs ${res} lacks ${name}: ${JSON.stringify(r.configEntries)}`);
      return e;
    };
    const retention = entry(topic, 'retention.ms');
    h.check(retention.configValue === '3600000' && !retention.isDefault, `retention.ms: ${JSON.stringify(retention)}`);
    const policy = entry(topic, 'cleanup.policy');
    h.check(policy.configValue === 'delete' && policy.isDefault, `cleanup.policy: ${JSON.stringify(policy)}`);
    const maxBytes = entry('1', 'message.max.bytes');
    h.check(maxBytes.configValue === '1048588', `broker message.max.bytes: ${JSON.stringify(maxBytes)}`);

    await admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] });
    h.check(JSON.stringify(await partitionsOf()) === '[0,1,2,3,4]', 'after createPartitions: want partitions 0 to 4');

    await admin.deleteTopics({ topics: [topic] });
    h.check(!(await admin.listTopics()).includes(topic), 'listTopics after deleteTopics still has the topic');
  } finally {
    await admin.disconnect();
  }
}

h.run(main, 'usage: node admin.js <bootstrap> <topic>', 'OK: kafkajs admin');
