package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FetchCopyingForTest answers a sessionless fetch (SessionEpoch -1) the copying way: the
// records read into the response and kmsg encoding all of it. It returns the body.
func FetchCopyingForTest(b *Broker, r *kmsg.FetchRequest) []byte {
	sess, code := b.sessions.begin(r, 0)
	if code != 0 {
		panic("FetchCopyingForTest: sessionless fetches only")
	}
	responseMax, _ := b.fetchBounds(r)
	fr, _, _ := b.readFetch(r, sess.targets(), responseMax, r.IsolationLevel == 1)
	defer fr.Release()
	fr.finish(sess)
	fr.SetVersion(r.Version)
	return fr.AppendTo(nil)
}

// LogReadForTest reads a partition's log the copying way (Log.Read): the whole batches from
// the one holding offset to the last whose base offset is below maxOffset.
func LogReadForTest(b *Broker, topic string, partition int32, offset, maxOffset int64) []byte {
	data, err := partitionOf(b.topics.get(topic), partition).log.Read(offset, 1<<31-1, maxOffset)
	if err != nil {
		panic(err)
	}
	return data
}

// OpenFilesUnder lists the files under dir this process holds open (it skips the test
// where /proc is missing).
func OpenFilesUnder(t testing.TB, dir string) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var open []string
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir) {
			open = append(open, target)
		}
	}
	return open
}
