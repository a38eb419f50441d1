package broker

import (
	"math"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/exactq/exactq/internal/server"
)

// handleDescribeLogDirs answers DescribeLogDirs (35) as Kafka 4.4's ReplicaManager does for
// a broker with one log directory, the data directory: each partition log this node holds
// (all of them when Topics is null, else those named) with its size on disk, offset lag 0
// (a leader's lag is max(high watermark - end, 0)) and IsFuture false (exactq never moves a
// log between directories). Partitions named but not held here are left out, and so is a
// topic left with none. TotalBytes and UsableBytes (v4+) are the file system's, from statfs.
func (b *Broker) handleDescribeLogDirs(req *server.Request, r *kmsg.DescribeLogDirsRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.cfg.DataDir
	if abs, err := filepath.Abs(b.cfg.DataDir); err == nil {
		dir.Dir = abs
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(b.cfg.DataDir, &fs); err != nil {
		// Kafka answers a directory it cannot describe with the error alone.
		dir.ErrorCode = kerr.KafkaStorageError.Code
		resp.Dirs = append(resp.Dirs, dir)
		return server.Reply{Resp: resp}
	}
	dir.TotalBytes = fileSystemBytes(fs.Blocks, fs.Frsize)
	dir.UsableBytes = fileSystemBytes(fs.Bavail, fs.Frsize)

	wanted := requestedLogDirPartitions(r)
	for _, t := range b.topics.all() {
		var only map[int32]bool
		if wanted != nil {
			if only = wanted[t.name]; only == nil {
				continue
			}
		}
		parts, _ := t.snapshot()
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = t.name
		for i, p := range parts {
			if p == nil || (only != nil && !only[int32(i)]) {
				continue // not held here, or offline: Kafka lists only the logs it has
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition = int32(i)
			dp.Size = p.log.Size()
			dt.Partitions = append(dt.Partitions, dp)
		}
		if len(dt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, dt)
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return server.Reply{Resp: resp}
}

// requestedLogDirPartitions is the request's topics as a set of partitions per topic, or
// nil when Topics is null (every partition). Its size is bounded by the request's.
func requestedLogDirPartitions(r *kmsg.DescribeLogDirsRequest) map[string]map[int32]bool {
	if r.Topics == nil {
		return nil
	}
	out := make(map[string]map[int32]bool, len(r.Topics))
	for _, rt := range r.Topics {
		set := out[rt.Topic]
		if set == nil {
			set = make(map[int32]bool, len(rt.Partitions))
			out[rt.Topic] = set
		}
		for _, p := range rt.Partitions {
			set[p] = true
		}
	}
	return out
}

// fileSystemBytes is blocks × block size as Java's FileStore reports it, capped at
// math.MaxInt64 where Kafka maps an overflowed (negative) size to Long.MAX_VALUE.
func fileSystemBytes(blocks uint64, blockSize int64) int64 {
	if blockSize <= 0 {
		return 0
	}
	if blocks > uint64(math.MaxInt64/blockSize) {
		return math.MaxInt64
	}
	return int64(blocks) * blockSize
}
