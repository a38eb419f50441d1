package broker

import (
	"io"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/share"
	"github.com/exactq/exactq/internal/share/sharepartition"
)

// shareReadMaxBytes caps one share-fetch read of a partition log (the first batch still
// comes whole, KIP-74). The read is also bounded by what the acquisition can take
// (share.Logs.Read's maxOffset, SharePartition.FetchEnd): clients ask for up to
// fetch.max.bytes (kgo: 50 MiB) while a share fetch hands out at most a few thousand
// records.
const shareReadMaxBytes = 1 << 20

// shareLogs is the partition-log view the share-fetch path reads records through.
type shareLogs struct{ b *Broker }

var _ share.Logs = shareLogs{}

func (s shareLogs) partition(topicID [16]byte, index int32) (*partition, error) {
	rt := s.b.routeTo(s.b.topics.getByID(topicID), index, kerr.UnknownTopicOrPartition)
	if rt.err != nil {
		return nil, rt.err
	}
	return rt.p, nil
}

// Read returns whole batches from offset up to maxOffset, the high watermark or (for
// read_committed) the last stable offset, with the aborted transactions overlapping them.
// The records stay in the segment files (shareRecords): a response sends them with
// sendfile.
func (s shareLogs) Read(topicID [16]byte, index int32, offset int64, maxBytes int32, maxOffset int64, readCommitted bool) (share.ReadResult, error) {
	p, err := s.partition(topicID, index)
	if err != nil {
		return share.ReadResult{}, err
	}
	res := share.ReadResult{HighWatermark: p.highWatermark(), LastStableOffset: p.lastStableOffset(), LogStartOffset: p.log.StartOffset()}
	upTo := res.HighWatermark
	if readCommitted {
		upTo = res.LastStableOffset
	}
	upTo = min(upTo, maxOffset)
	if readCommitted {
		for _, a := range p.abortedIn(offset, upTo) {
			res.Aborted = append(res.Aborted, sharepartition.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
		}
	}
	if offset < res.LogStartOffset {
		return res, kerr.OffsetOutOfRange
	}
	if offset >= upTo {
		return res, nil
	}
	chunks, n, err := p.log.ReadChunks(nil, offset, min(maxBytes, shareReadMaxBytes), upTo)
	if err != nil || n == 0 {
		return res, err
	}
	res.Records = &shareRecords{chunks: chunks, n: n}
	return res, nil
}

// shareRecords implements share.Records over log chunks: a read held in the segment files
// until the response carrying it is written (newShareFetchReply takes the chunks) or it is
// released.
type shareRecords struct {
	chunks []log.Chunk
	n      int64
}

func (r *shareRecords) Len() int64 { return r.n }

// shareHeaderWindow is how much Batches reads at a time: many small batches' headers in
// one pread, a big batch's header without reading its records.
const shareHeaderWindow = 4 << 10

// Batches reads the batch headers (and control batches whole, for their markers).
func (r *shareRecords) Batches() ([]share.ReadBatch, error) {
	var (
		out    []share.ReadBatch
		win    [shareHeaderWindow]byte
		winOff int64 // file position of win[0]
		winLen int   // valid bytes in win
		pos    int64 // position in the read of the chunk's start
	)
	for _, c := range r.chunks {
		f := c.File()
		winLen = 0
		for off, end := c.Off, c.Off+c.Len; off < end; {
			if off < winOff || off+batch.HeaderSize > winOff+int64(winLen) {
				n, err := f.ReadAt(win[:min(int64(len(win)), end-off)], off)
				if n < batch.HeaderSize {
					if err == nil || err == io.EOF {
						err = batch.ErrCorrupt
					}
					return nil, err
				}
				winOff, winLen = off, n
			}
			b := win[off-winOff : winLen]
			size := share.BatchLen(b)
			if size < batch.HeaderSize || off+size > end {
				return nil, batch.ErrCorrupt
			}
			if share.IsControlBatch(b) && size > int64(len(b)) {
				b = make([]byte, size) // control batches are small
				if _, err := f.ReadAt(b, off); err != nil {
					return nil, err
				}
			}
			fb, err := share.DescribeBatch(b[:min(size, int64(len(b)))])
			if err != nil {
				return nil, err
			}
			out = append(out, share.ReadBatch{FetchedBatch: fb, Pos: pos + off - c.Off, Len: size})
			off += size
		}
		pos += c.Len
	}
	return out, nil
}

// Slice keeps bytes [from, to) of the read: chunks outside are released, the ones at the
// edges narrowed (a chunk's reference covers its file, whatever its range).
func (r *shareRecords) Slice(from, to int64) {
	kept := r.chunks[:0]
	pos := int64(0)
	for _, c := range r.chunks {
		start := pos
		pos += c.Len
		lo, hi := max(from, start), min(to, pos)
		if lo >= hi {
			c.Release()
			continue
		}
		c.Off, c.Len = c.Off+lo-start, hi-lo
		kept = append(kept, c)
	}
	clear(r.chunks[len(kept):])
	r.chunks, r.n = kept, max(to-from, 0)
}

// AppendTo copies the records (the copying path, and what tests compare with).
func (r *shareRecords) AppendTo(dst []byte) ([]byte, error) {
	for _, c := range r.chunks {
		n := len(dst)
		dst = append(dst, make([]byte, c.Len)...)
		if _, err := c.File().ReadAt(dst[n:], c.Off); err != nil {
			return dst[:n], err
		}
	}
	return dst, nil
}

func (r *shareRecords) Release() {
	log.ReleaseChunks(r.chunks)
	r.chunks, r.n = nil, 0
}

// Watch signals ch whenever the partition's high watermark advances (markers advance it
// too, so last-stable-offset moves are seen).
func (s shareLogs) Watch(topicID [16]byte, index int32, ch chan struct{}) func() {
	p, err := s.partition(topicID, index)
	if err != nil {
		return func() {}
	}
	p.watch(ch)
	return func() { p.unwatch(ch) }
}

// ListOffset resolves share.auto.offset.reset: -2 earliest, -1 latest, else by timestamp.
func (s shareLogs) ListOffset(topicID [16]byte, index int32, timestampMs int64) (int64, error) {
	p, err := s.partition(topicID, index)
	if err != nil {
		return -1, err
	}
	switch timestampMs {
	case listEarliest:
		return p.log.StartOffset(), nil
	case listLatest:
		return p.highWatermark(), nil
	}
	off, _, ok, err := p.log.OffsetForTimestamp(timestampMs)
	if err != nil {
		return -1, err
	}
	if !ok || off >= p.highWatermark() {
		return -1, nil
	}
	return off, nil
}

func (s shareLogs) TopicName(id [16]byte) (string, bool) {
	if t := s.b.topics.getByID(id); t != nil {
		return t.name, true
	}
	return "", false
}
