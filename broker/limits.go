package broker

import (
	"golang.org/x/sys/unix"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Partition limits. One request creates at most maxPartitionsPerRequest partitions (Kafka's
// own cap, topicadmin.go); the broker as a whole hosts at most max.broker.partitions, so
// that creating topics can never use up the descriptors (or memory) the broker needs to
// accept connections and serve the partitions it has. Kafka has no such limit; KIP-578
// proposed this name for it.

// descriptorsPerPartition is what one idle partition keeps open: its active segment's log
// file (each closed segment holds one more until its log opens files lazily).
const descriptorsPerPartition = 1

// minDefaultMaxBrokerPartitions keeps the sized default usable under a tiny descriptor limit.
const minDefaultMaxBrokerPartitions = 1000

// defaultMaxBrokerPartitions sizes max.broker.partitions from the open-file limit: half of
// the descriptors go to partitions, the other half stay for connections (--max-connections
// defaults to 10,000), coordinator logs, segments that roll and temporary files. Under the
// common 1,048,576 that is 524,288 partitions; under 20,000, 10,000.
func defaultMaxBrokerPartitions(openFileLimit uint64) int64 {
	n := int64(openFileLimit/2) / descriptorsPerPartition
	return max(n, minDefaultMaxBrokerPartitions)
}

// openFileLimit is RLIMIT_NOFILE's soft limit (Go raises it to the hard limit at start).
func openFileLimit() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return rl.Cur
}

// maxBrokerPartitions is max.broker.partitions as set, or sized from the descriptor limit.
func (d brokerDefaults) maxBrokerPartitions() int64 {
	if n, ok := d.topic.MaxBrokerPartitions(); ok {
		return int64(n)
	}
	return defaultMaxBrokerPartitions(openFileLimit())
}

// checkBrokerPartitions refuses adding n partitions when the broker would then host more
// than max.broker.partitions. Internal topics are not checked (their few partitions are
// created by the broker itself, and groups and transactions need them), but they count.
// Caller holds adminMu, which serializes every change of the count.
func (b *Broker) checkBrokerPartitions(n int64) *adminError {
	have := b.partitionCount.Load()
	if have+n <= b.maxPartitions {
		return nil
	}
	return newAdminError(kerr.PolicyViolation,
		"Adding %d partition(s) would exceed this broker's limit of %d partitions (max.broker.partitions); it hosts %d.",
		n, b.maxPartitions, have)
}
