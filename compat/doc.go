// Package compat holds exactq's interop suites: unmodified Kafka clients written by other
// people (franz-go kgo/kadm, IBM sarama, kcat/librdkafka, the Java kafka-clients) run
// against a real in-process exactq broker and check the outcomes a user relies on.
//
// The suites live in test files; run them with `go test ./compat/...`. The kcat suite needs
// `kcat` on PATH (Debian: `apt-get install -y kcat`) and the Java suite needs `mvn` and
// `java`; each skips, saying so, only when its tool is missing.
package compat
