package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/server"
	"github.com/exactq/exactq/internal/share"
)

// fetchReply is a FetchResponse whose record batches stay in the segment files until the
// server writes them: zero-copy fetch. The kmsg response holds everything but the records
// (each partition's RecordBatches is empty); the recordChunks say which partitions have
// records and where they are (log chunks, which keep their files open, whatever retention
// or compaction do meanwhile, until Release).
//
// The server writes it through server.SplicedResponse: AppendSpliced has kmsg encode the
// response and marks where each partition's records go, and the server sends those with
// sendfile(2) between the encoded pieces. Anything else that encodes it gets AppendTo,
// which copies the records in and lets kmsg encode the whole thing, as before.
type fetchReply struct {
	*kmsg.FetchResponse
	splicing
	// leaders are the leaders named in the partitions' KIP-951 hints, whose endpoints
	// the response carries (set while it is built).
	leaders map[int32]bool
}

func newFetchReply(resp *kmsg.FetchResponse) *fetchReply {
	fr := &fetchReply{FetchResponse: resp, leaders: map[int32]bool{}}
	fr.splicing = splicing{resp: resp, layout: fr}
	return fr
}

// AppendTo implements kmsg.Response by copying (see splicing.AppendTo).
func (fr *fetchReply) AppendTo(dst []byte) []byte { return fr.splicing.AppendTo(dst) }

// hasRecords tells the fetch session which partitions carry records (their RecordBatches
// are empty until encoding).
func (fr *fetchReply) hasRecords(t *kmsg.FetchResponseTopic, p *kmsg.FetchResponseTopicPartition) bool {
	return fr.find(t.Topic, t.TopicID, p.Partition, 0) >= 0
}

// slots lists the partitions with records in encoding order (kmsg encodes topics, then
// their partitions, in slice order). A fetch session may have dropped partitions since the
// read, never added any.
func (fr *fetchReply) slots(out []slot) []slot {
	hint := 0
	for i := range fr.Topics {
		t := &fr.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if k := fr.find(t.Topic, t.TopicID, p.Partition, hint); k >= 0 {
				out = append(out, slot{field: &p.RecordBatches, recs: &fr.recs[k]})
				hint = k + 1
			}
		}
	}
	return out
}

// shareFetchReply is a ShareFetchResponse sent the same way: the share path leaves each
// partition's acquired batches in the segment files (shareRecords), and they are spliced
// in where kmsg encodes the partition's Records.
type shareFetchReply struct {
	*kmsg.ShareFetchResponse
	splicing
	fields []*[]byte // fields[i] is the Records field recs[i] fills
}

// newShareFetchReply takes over the records of a share.FetchResponse (they are in
// encoding order, and the response no longer changes).
func newShareFetchReply(r *share.FetchResponse) *shareFetchReply {
	sr := &shareFetchReply{ShareFetchResponse: r.ShareFetchResponse}
	sr.splicing = splicing{resp: r.ShareFetchResponse, layout: sr}
	for i, pr := range r.Records {
		if rec, ok := pr.Records.(*shareRecords); ok && len(rec.chunks) > 0 {
			sr.recs = append(sr.recs, partRecords{topicID: pr.TopicID, partition: pr.Partition,
				from: len(sr.chunks), to: len(sr.chunks) + len(rec.chunks), bytes: rec.n})
			sr.fields = append(sr.fields, r.Field(i))
			sr.chunks = append(sr.chunks, rec.chunks...)
			rec.chunks = nil // the reply owns them now
		}
		pr.Records.Release()
	}
	r.Records = nil
	return sr
}

// AppendTo implements kmsg.Response by copying (see splicing.AppendTo).
func (sr *shareFetchReply) AppendTo(dst []byte) []byte { return sr.splicing.AppendTo(dst) }

func (sr *shareFetchReply) slots(out []slot) []slot {
	for i := range sr.recs {
		out = append(out, slot{field: sr.fields[i], recs: &sr.recs[i]})
	}
	return out
}

// splicing is the zero-copy encoding shared by fetchReply and shareFetchReply: resp is the
// kmsg response without records, layout says where recordChunks' records go in it.
type splicing struct {
	resp   kmsg.Response
	layout interface{ slots([]slot) []slot }
	buf    [16]slot // for slots, without an allocation per encoding
	recordChunks
}

// AppendTo encodes the response by copying (see recordChunks.appendCopying).
func (s *splicing) AppendTo(dst []byte) []byte {
	return s.appendCopying(s.resp, s.layout.slots(nil), dst)
}

// AppendSpliced implements server.SplicedResponse (see recordChunks.appendSpliced).
func (s *splicing) AppendSpliced(dst []byte, ins []server.Insert) ([]byte, []server.Insert, error) {
	return s.appendSpliced(s.resp, s.layout.slots(s.buf[:0]), dst, ins)
}

// recordChunks are the records of a zero-copy response (fetchReply, shareFetchReply): for
// each partition that has some, a run of log chunks.
type recordChunks struct {
	recs   []partRecords // partitions with records, in the order they were read
	chunks []log.Chunk   // recs[i] owns chunks[recs[i].from:recs[i].to]
}

// partRecords is one partition's records in a recordChunks.
type partRecords struct {
	topic     string // "" in ShareFetch, which names topics by id only
	topicID   [16]byte
	partition int32
	from, to  int   // its chunks
	bytes     int64 // their total length
}

// readRecords reads a partition's records as chunks (log.ReadChunks) and attaches them
// to the partition. It returns their length; nothing is attached when it is 0, or when
// keep rejects the length (the read is released).
func (rc *recordChunks) readRecords(l *log.Log, tg fetchTarget, limit int32, upTo int64, keep func(int64) bool) (int64, error) {
	from := len(rc.chunks)
	chunks, n, err := l.ReadChunks(rc.chunks, tg.offset, limit, upTo)
	if err != nil || n == 0 {
		return 0, err
	}
	if !keep(n) {
		log.ReleaseChunks(chunks[from:])
		rc.chunks = chunks[:from]
		return 0, nil
	}
	rc.chunks = chunks
	rc.recs = append(rc.recs, partRecords{topic: tg.topic, topicID: tg.topicID, partition: tg.partition,
		from: from, to: len(chunks), bytes: n})
	return n, nil
}

// Release implements server.SplicedResponse: the files may close. Idempotent; the fetch
// handler also releases the reads a long poll replaces.
func (rc *recordChunks) Release() {
	log.ReleaseChunks(rc.chunks)
	rc.chunks, rc.recs = nil, nil
}

// find returns the index in recs of the partition's records, or -1, looking from hint on
// first (responses keep the read order, so a walk in order finds each at its hint).
func (rc *recordChunks) find(topic string, topicID [16]byte, partition int32, hint int) int {
	for k := range rc.recs {
		i := (hint + k) % len(rc.recs)
		r := &rc.recs[i]
		if r.partition == partition && r.topic == topic && r.topicID == topicID {
			return i
		}
	}
	return -1
}

// slot is one partition of the response that carries records: its records field and its
// records.
type slot struct {
	field *[]byte
	recs  *partRecords
}

// appendCopying encodes resp with every slot's records read from their chunks (pread)
// into its field, then empties the fields again. The server does not use it (see
// appendSpliced); it is the reference the zero-copy path is tested against. An unreadable
// segment panics: kmsg.Response.AppendTo has no error.
func (rc *recordChunks) appendCopying(resp kmsg.Response, slots []slot, dst []byte) []byte {
	for _, s := range slots {
		b := make([]byte, 0, s.recs.bytes)
		for _, c := range rc.chunks[s.recs.from:s.recs.to] {
			n := len(b)
			b = b[:n+int(c.Len)]
			if _, err := c.File().ReadAt(b[n:], c.Off); err != nil {
				panic(fmt.Sprintf("fetch: reading records of %s/%d: %v", s.recs.topic, s.recs.partition, err))
			}
		}
		*s.field = b
	}
	dst = resp.AppendTo(dst)
	for _, s := range slots {
		*s.field = []byte{}
	}
	return dst
}

// probeBufs holds the two probe encodings of AppendSpliced (a few dozen bytes a
// partition), reused across responses.
var probeBufs = sync.Pool{New: func() any { return new([2][]byte) }}

// Stand-ins for records in the probe encodings: one byte, 0x00 in one and 0xFF in the other.
var standIn = [2][]byte{{0x00}, {0xff}}

var errProbe = errors.New("fetch: zero-copy encoding: probe encodings do not have the expected shape")

// appendSpliced encodes resp for server.SplicedResponse: kmsg encodes the response; only
// the records themselves are left out, to be sent from the files. To find where each
// slot's records go, kmsg encodes the response twice with a one-byte stand-in as every
// slot's records, 0x00 the first time and 0xFF the second: the encodings are equal except
// at the stand-ins (everything else is the same struct, and kmsg's encoding is
// deterministic), so the k-th differing byte is the k-th slot's records, in encoding order.
// The output is the first probe with each stand-in cut out and its length prefix (the
// bytes just before it: INT32 length, or UVARINT length+1 in flexible versions, as kmsg's
// appendNullableBytes writes them with kbin) rewritten for the real length, with an insert
// for each chunk at that point.
//
// Every assumption is checked on each call: exactly one differing byte per slot, each
// preceded by the prefix kbin writes for one byte. A response that does not pass is
// encoded by copying instead (appendCopying), so the bytes are right either way.
//
// Letting kmsg encode the real lengths instead (stand-ins of the real length, sliced from
// a zero buffer) would also need locating, and costs a copy of every record byte into the
// encoding buffer (memmove at ~40 GB/s here: ~190 µs for an 8 MiB response, 6% of
// BenchmarkFetch's 8-partition fetch) plus a buffer as large as the response per
// connection.
func (rc *recordChunks) appendSpliced(resp kmsg.Response, slots []slot, dst []byte, ins []server.Insert) ([]byte, []server.Insert, error) {
	if len(slots) == 0 {
		return resp.AppendTo(dst), ins, nil
	}
	bufs := probeBufs.Get().(*[2][]byte)
	defer probeBufs.Put(bufs)
	for i := range bufs {
		for _, s := range slots {
			*s.field = standIn[i]
		}
		bufs[i] = resp.AppendTo(bufs[i][:0])
	}
	for _, s := range slots {
		*s.field = []byte{}
	}
	a, b := bufs[0], bufs[1]

	flexible := resp.IsFlexible()
	var prefixBuf [5]byte
	standInPrefix := appendRecordsPrefix(prefixBuf[:0], 1, flexible)
	start, cur := len(dst), 0
	ok := len(a) == len(b)
	for _, s := range slots {
		if !ok {
			break
		}
		p := nextDiff(a, b, cur)
		if p < cur+len(standInPrefix) || a[p] != 0x00 || b[p] != 0xff || string(a[p-len(standInPrefix):p]) != string(standInPrefix) {
			ok = false
			break
		}
		dst = append(dst, a[cur:p-len(standInPrefix)]...)
		dst = appendRecordsPrefix(dst, s.recs.bytes, flexible)
		for _, c := range rc.chunks[s.recs.from:s.recs.to] {
			ins = append(ins, server.Insert{At: len(dst), Chunk: server.FileChunk{File: c.File(), Off: c.Off, Len: c.Len}})
		}
		cur = p + 1
	}
	if ok && nextDiff(a, b, cur) < 0 {
		return append(dst, a[cur:]...), ins, nil
	}
	// Not the shape this code knows (a kmsg change?): copy, which is always right.
	dst, ins = dst[:start], ins[:0]
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w; copying instead failed: %v", errProbe, r)
			}
		}()
		dst = rc.appendCopying(resp, slots, dst)
	}()
	return dst, ins, err
}

// appendRecordsPrefix appends the length prefix of a non-null records field of n bytes,
// as kmsg's appendNullableBytes does: kbin's INT32 length, or UVARINT length+1 when
// flexible.
func appendRecordsPrefix(dst []byte, n int64, flexible bool) []byte {
	if flexible {
		return kbin.AppendUvarint(dst, uint32(n+1))
	}
	return kbin.AppendInt32(dst, int32(n))
}

// nextDiff returns the first index >= from where a and b (of equal length) differ, or -1.
func nextDiff(a, b []byte, from int) int {
	i := from
	for ; i+8 <= len(a); i += 8 {
		if binary.LittleEndian.Uint64(a[i:]) != binary.LittleEndian.Uint64(b[i:]) {
			break
		}
	}
	for ; i < len(a); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
