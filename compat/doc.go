// Package compat holds exactq's interop suites: unmodified Kafka clients and tools written by
// other people run against a real in-process exactq broker and check the outcomes a user
// relies on:
//   - franz-go kgo/kadm and IBM sarama (Go modules);
//   - kcat/librdkafka 2.0 (Debian's kcat);
//   - the Java kafka-clients 4.4 (Maven project compat/java);
//   - confluent-kafka 2.16 for Python (librdkafka 2.16: producer, classic and KIP-848
//     consumer groups, transactions, ShareConsumer; scripts in compat/python);
//   - kafkajs 2.2.4 for Node.js (admin, idempotent producer, consumer group, transactions;
//     scripts in compat/node);
//   - Apache Kafka 4.4's own command-line tools, run as the Java main classes their
//     kafka-*.sh scripts start (kafka-topics, kafka-configs, kafka-consumer-groups,
//     kafka-share-groups, kafka-console-share-consumer, kafka-transactions, kafka-features,
//     kafka-metadata-quorum; jars resolved from compat/kafkatools/pom.xml).
//
// The suites live in test files; run them with `go test ./compat/...`. Each installs its
// client itself the first time, into the user cache directory (exactq-compat/...): pip into
// a virtual environment, npm into a folder of its own, Maven into ~/.m2. A suite skips,
// saying so, only when the program it needs is missing from PATH (kcat; python3; node and
// npm; mvn and java); when the registry cannot be reached and nothing is cached it fails: no
// suite passes without running its client.
package compat
