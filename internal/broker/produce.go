package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/batch"
	"github.com/exactq/exactq/internal/compress"
	"github.com/exactq/exactq/internal/log"
	"github.com/exactq/exactq/internal/server"
)

// appendResult is what a produce response reports for one partition.
type appendResult struct {
	code          int16
	message       string
	baseOffset    int64
	end           int64 // offset after the appended batch; what acks=all waits for
	logAppendTime int64 // -1 unless the topic uses LogAppendTime
	duplicate     bool  // a retry of a batch already in the log: nothing was appended
}

func errResult(err *kerr.Error, msg string) appendResult {
	return appendResult{code: err.Code, message: msg, baseOffset: -1, logAppendTime: -1}
}

func (b *Broker) handleProduce(ctx context.Context, req *server.Request, r *kmsg.ProduceRequest) server.Reply {
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	acks := r.Acks
	validAcks := acks == -1 || acks == 0 || acks == 1
	anyError := false
	type pending struct {
		part   *partition
		ti, pi int // position in resp.Topics
		end    int64
	}
	var waits []pending
	leaders := map[int32]bool{} // named in KIP-951 hints

	for ti := range r.Topics {
		rt := &r.Topics[ti]
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		var t *topic
		missing := kerr.UnknownTopicOrPartition
		if req.Version >= 13 {
			t = b.topics.getByID(rt.TopicID)
			missing = kerr.UnknownTopicID
		} else {
			t = b.topics.get(rt.Topic)
		}
		for pi := range rt.Partitions {
			rp := &rt.Partitions[pi]
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			var res appendResult
			var rte route
			if t != nil {
				rte = b.routeTo(t, rp.Partition, kerr.UnknownTopicOrPartition)
			}
			switch {
			case !validAcks:
				res = errResult(kerr.InvalidRequiredAcks, "acks must be -1, 0 or 1")
			case t == nil:
				res = errResult(missing, "")
			case rte.err != nil:
				res = errResult(rte.err, "")
				produceHint(rte, req.Version, &sp, leaders)
			case t.internal && !b.allowInternalWrites():
				res = errResult(kerr.InvalidTopicException, "cannot append to internal topic "+t.name)
			default:
				res = b.produceToPartition(ctx, r.TransactionID, t, rte.p, rp.Records, req.Version)
			}
			sp.ErrorCode = res.code
			if res.message != "" {
				m := res.message
				sp.ErrorMessage = &m
			}
			sp.BaseOffset = res.baseOffset
			sp.LogAppendTime = res.logAppendTime
			sp.LogStartOffset = -1
			if rte.p != nil {
				sp.LogStartOffset = rte.p.log.StartOffset()
			}
			if res.code != 0 {
				anyError = true
			}
			st.Partitions = append(st.Partitions, sp)
			if res.code == 0 && !res.duplicate && acks == -1 && b.cfg.Fsync == FsyncAlways {
				waits = append(waits, pending{part: rte.p, ti: ti, pi: pi, end: res.end})
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(leaders) > 0 {
		b.produceEndpoints(resp, leaders)
	}

	// BodyDone: the batches are in the log (or rejected) and nothing below keeps a
	// reference into the request, so the server can reuse its frame for the next one.
	if acks == 0 {
		// No response is sent for acks=0. Kafka closes the connection when such a request
		// failed, the only way to tell a client that does not read responses.
		return server.Reply{Close: anyError, BodyDone: true}
	}
	if len(waits) == 0 {
		return server.Reply{Resp: resp, BodyDone: true}
	}
	return server.Reply{BodyDone: true, Wait: func() kmsg.Response {
		for _, w := range waits {
			if err := w.part.log.WaitDurable(w.end); err != nil {
				b.logger.Error("produce fsync failed", "topic", w.part.topic.name, "partition", w.part.index, "err", err)
				sp := &resp.Topics[w.ti].Partitions[w.pi]
				sp.ErrorCode = kerr.KafkaStorageError.Code
				sp.BaseOffset = -1
				continue
			}
			// Publish the high watermark before answering, as Kafka's DelayedProduce does:
			// a client reading right after its ack must see its record.
			w.part.advanceHW(w.part.log.DurableEnd())
		}
		return resp
	}}
}

func partitionOf(t *topic, i int32) *partition {
	if t == nil {
		return nil
	}
	return t.partition(i)
}

// allowInternalWrites reports whether clients may produce to internal topics. They may
// not: internal topics are written by exactq's coordinators only.
func (b *Broker) allowInternalWrites() bool { return false }

// decompressionWait bounds how long a compressed produce batch waits for decompression
// budget (exactq.decompression.budget.bytes) before REQUEST_TIMED_OUT.
const decompressionWait = 10 * time.Second

// produceToPartition validates one partition's records and appends them.
func (b *Broker) produceToPartition(ctx context.Context, transactionalID *string, t *topic, p *partition, records []byte, version int16) appendResult {
	_, settings := t.snapshot()
	// Kafka's ProduceRequest.validateRecords rules for v3+: at least one batch, magic 2,
	// exactly one batch per partition. The magic byte sits at offset 16 in every message
	// format, so it can be read before the batch is split.
	if len(records) == 0 {
		return errResult(kerr.InvalidRecord, fmt.Sprintf("Produce requests with version %d must have at least one record batch per partition", version))
	}
	if len(records) > 16 && records[16] != 2 {
		return errResult(kerr.InvalidRecord, fmt.Sprintf("Produce requests with version %d are only allowed to contain record batches with magic version 2", version))
	}
	batches, err := batch.Split(records)
	if err != nil {
		return errResult(kerr.CorruptMessage, err.Error())
	}
	if len(batches) != 1 {
		return errResult(kerr.InvalidRecord, fmt.Sprintf("Produce requests with version %d are only allowed to contain exactly one record batch per partition", version))
	}
	raw := batches[0]
	now := b.now().UnixMilli()
	// Decompressed records may not exceed max.message.bytes either (exactq's rule: Kafka
	// streams them unbounded), and decompression memory is budgeted broker-wide (#17).
	h, err := batch.Validate(raw, batch.ValidateOptions{MaxBatchBytes: settings.maxMessageBytes,
		MaxDecompressedBytes: settings.maxMessageBytes, Compacted: settings.compacted, Budget: b.decompression,
		Timestamps: batch.TimestampRule{Check: !settings.logAppendTime, NowMs: now,
			BeforeMaxMs: settings.timestampBeforeMs, AfterMaxMs: settings.timestampAfterMs}})
	if err != nil {
		code := batch.KafkaCode(err)
		return errResult(kerr.ErrorForCode(code).(*kerr.Error), err.Error())
	}
	if codec := h.Attributes & batch.AttrCompressionMask; codec == batch.CodecZstd && version < 7 {
		return errResult(kerr.UnsupportedCompressionType, "zstd requires produce v7 or later")
	}
	if h.Attributes&batch.AttrTransactional != 0 {
		if code, msg := b.checkTransactional(ctx, transactionalID, h, t, p.index, version); code != 0 {
			return errResult(kerr.ErrorForCode(code).(*kerr.Error), msg)
		}
	}
	if code, msg := b.checkProducerIssued(h.ProducerID); code != 0 {
		return errResult(kerr.ErrorForCode(code).(*kerr.Error), msg)
	}
	if code, msg := settings.checkTimestamps(h, now); code != 0 {
		return errResult(kerr.ErrorForCode(code).(*kerr.Error), msg)
	}
	if settings.storeCodec != codecProducer && int8(h.Attributes&batch.AttrCompressionMask) != settings.storeCodec {
		if raw, h, err = recompress(h, settings, b.decompression); err != nil {
			code := batch.KafkaCode(err)
			return errResult(kerr.ErrorForCode(code).(*kerr.Error), err.Error())
		}
	}
	res := p.append(raw, h, settings, now)
	if res.code == 0 && !res.duplicate {
		if b.cfg.Fsync == FsyncAlways {
			p.kickSync()
		} else {
			p.advanceHW(res.end)
		}
	}
	return res
}

// append checks producer sequences and appends one validated batch.
func (p *partition) append(raw []byte, h kmsg.RecordBatch, settings topicSettings, nowMs int64) appendResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The leader stamps its epoch on every batch (outside the CRC), as Kafka does; consumers
	// track it for KIP-320 log truncation detection.
	batch.SetLeaderEpoch(raw, p.epoch.Load())
	logAppendTime := int64(-1)
	if settings.logAppendTime {
		batch.SetLogAppendTime(raw, nowMs)
		logAppendTime = nowMs
	}
	if h.ProducerID >= 0 {
		dup, err := p.checkProducer(h)
		if err != nil {
			var ke *kerr.Error
			if errors.As(err, &ke) {
				return errResult(ke, err.Error())
			}
			return errResult(kerr.UnknownServerError, err.Error())
		}
		if dup != nil {
			return *dup
		}
	}
	first, _, err := p.log.Append([][]byte{raw})
	switch {
	case errors.Is(err, log.ErrRecordListTooLarge):
		return errResult(kerr.RecordListTooLarge, err.Error())
	case errors.Is(err, log.ErrClosed):
		// The topic was deleted while this request was in flight.
		return errResult(kerr.NotLeaderForPartition, err.Error())
	case err != nil:
		return errResult(kerr.KafkaStorageError, err.Error())
	}
	if h.ProducerID >= 0 {
		h.FirstOffset = first
		if settings.logAppendTime {
			h.MaxTimestamp = nowMs
		}
		p.recordProducer(h)
		if h.Attributes&batch.AttrTransactional != 0 {
			p.refreshUnstable()
		}
	}
	return appendResult{baseOffset: first, end: first + int64(h.LastOffsetDelta) + 1, logAppendTime: logAppendTime}
}

// codecProducer is compression.type=producer: batches are stored with the producer's codec.
const codecProducer int8 = -1

// storeCodec maps a topic's compression.type onto the codec its batches are stored with.
func storeCodec(compressionType string) int8 {
	switch compressionType {
	case "uncompressed":
		return batch.CodecNone
	case "gzip":
		return batch.CodecGzip
	case "snappy":
		return batch.CodecSnappy
	case "lz4":
		return batch.CodecLZ4
	case "zstd":
		return batch.CodecZstd
	}
	return codecProducer
}

// recompress re-encodes a validated batch with the topic's compression.type, as Kafka's
// LogValidator.validateMessagesAndAssignOffsetsCompressed does when the codecs differ:
// producer id, epoch, sequence, transactional bit, timestamps and offset deltas are kept.
// The result must still fit max.message.bytes (Kafka: RecordTooLargeException,
// MESSAGE_TOO_LARGE). compression.gzip.level and compression.zstd.level apply;
// compression.lz4.level does not (the lz4 library's fast level; docs/operations.md).
func recompress(h kmsg.RecordBatch, settings topicSettings, budget *compress.Budget) ([]byte, kmsg.RecordBatch, error) {
	raw, err := batch.Recompress(&h, settings.storeCodec, settings.storeLevel, settings.maxMessageBytes, budget)
	if err != nil {
		return nil, h, err
	}
	if len(raw) > settings.maxMessageBytes {
		return nil, h, fmt.Errorf("%w: the batch recompressed to %s is %d bytes, max.message.bytes is %d",
			batch.ErrTooLarge, compress.Name(settings.storeCodec), len(raw), settings.maxMessageBytes)
	}
	h, err = batch.Parse(raw)
	return raw, h, err
}
