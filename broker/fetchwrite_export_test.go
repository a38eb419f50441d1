package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// FetchCopyingForTest answers a sessionless fetch (SessionEpoch -1) the copying way: the
// records read into the response and kmsg encoding all of it. It returns the body.
func FetchCopyingForTest(b *Broker, r *kmsg.FetchRequest) []byte {
	sess, code := b.sessions.begin(r, 0)
	if code != 0 {
		panic("FetchCopyingForTest: sessionless fetches only")
	}
	responseMax := r.MaxBytes
	if responseMax <= 0 || r.Version < 3 {
		responseMax = 1<<31 - 1
	}
	fr, _, _ := b.readFetch(r, sess.targets(), responseMax, r.IsolationLevel == 1)
	defer fr.Release()
	fr.finish(sess)
	fr.SetVersion(r.Version)
	return fr.AppendTo(nil)
}
