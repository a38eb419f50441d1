package broker

import "github.com/exactq/exactq/internal/log"

// CleanerKeysForTest is the broker's compaction key map (log.cleaner.dedupe.buffer.size).
func CleanerKeysForTest(b *Broker) *log.KeyMap { return b.cleanerKeys }
