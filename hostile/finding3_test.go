package hostile

import (
	"testing"

	"github.com/exactq/exactq/internal/compress"
)

// Finding 3: uncompressed records were not validated; consumers then met records they
// cannot parse (Java's KafkaConsumer throws at that offset on every poll; kgo skips).
func TestUncompressedBatchValidation(t *testing.T) {
	runAttack(t, attack{
		name: "#3 malformed uncompressed batches", rssBytes: defaultRSSBound, minRatio: defaultRatio, p99: defaultP99,
		run: func(t *testing.T, h *harness) {
			createTopic(t, h.addr(), "attacked", 1, nil)
			produceMalformed(t, h.addr(), "attacked", compress.None)
			checkReadable(t, h.addr(), "attacked")
		},
		after: func(t *testing.T, h *harness) { checkReadable(t, h.addr(), "attacked") },
	})
}
