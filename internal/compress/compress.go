// Package compress implements Kafka's four record batch compression codecs: gzip (1),
// snappy (2), lz4 (3) and zstd (4), in the exact framings real clients send.
//
// Encoders and decoders are pooled: the produce path decompresses every compressed batch it
// validates, so a fresh zstd or gzip state per call would dominate its cost. Every decoder
// is bounded: DecompressLimit fails with ErrTooLarge as soon as the output would exceed the
// caller's limit, before allocating it where the format declares a size, so a small
// "decompression bomb" cannot make the broker allocate gigabytes.
//
// Framings (checked against franz-go v1.22.3 pkg/kgo/compression.go, Kafka's
// KafkaLZ4BlockInputStream/SnappyInputStream usage):
//   - gzip: RFC 1952, possibly several members back to back.
//   - snappy: either one raw snappy block (librdkafka, franz-go Compress, sarama) or the
//     xerial framing that Java's snappy-java SnappyOutputStream writes: the 8 byte magic
//     "\x82SNAPPY\x00", int32 version and int32 min compatible version, then blocks of
//     int32 big endian length + raw snappy block. We decode both and encode raw blocks,
//     which Java's SnappyInputStream accepts (it falls back to raw when the magic is
//     absent). Decoding is strict standard snappy: the S2 extensions some Go decoders
//     accept are rejected, because a Java consumer could not read them.
//   - lz4: the LZ4 frame format (magic 0x184D2204), independent blocks.
//   - zstd: one or more zstd frames.
package compress

import (
	"errors"
	"fmt"
	"math"
)

// Codec numbers, as stored in the low three bits of a v2 batch's attributes.
const (
	None   int8 = 0
	Gzip   int8 = 1
	Snappy int8 = 2
	LZ4    int8 = 3
	Zstd   int8 = 4
)

// DefaultMaxBytes bounds the output of Decompress. It is generous for a single batch
// (Kafka's default max.message.bytes is about 1 MiB, and compression ratios over 50 are
// rare) while keeping a bomb from costing more than this much memory.
const DefaultMaxBytes = 64 << 20

var (
	// ErrUnknownCodec is returned for a codec number outside 0..4. Kafka answers
	// CORRUPT_MESSAGE (or UNSUPPORTED_COMPRESSION_TYPE for a known but disabled codec).
	ErrUnknownCodec = errors.New("compress: unknown codec")
	// ErrCorrupt wraps every decoding failure of a codec library.
	ErrCorrupt = errors.New("compress: corrupt compressed data")
	// ErrTooLarge is returned when the decompressed data would exceed the limit.
	ErrTooLarge = errors.New("compress: decompressed data exceeds limit")
)

// Name returns the Kafka configuration name of a codec ("gzip", "snappy", ...).
func Name(codec int8) string {
	switch codec {
	case None:
		return "none"
	case Gzip:
		return "gzip"
	case Snappy:
		return "snappy"
	case LZ4:
		return "lz4"
	case Zstd:
		return "zstd"
	}
	return fmt.Sprintf("codec(%d)", codec)
}

// Compress appends src compressed with codec to dst and returns the extended slice. For
// None it appends src unchanged. Levels are the codecs' defaults (Kafka's too: gzip -1,
// zstd 3).
func Compress(codec int8, dst, src []byte) ([]byte, error) {
	return CompressLevel(codec, DefaultLevel, dst, src)
}

// DefaultLevel asks CompressLevel for the codec's default level (not -1: that is a zstd
// level of its own).
const DefaultLevel = math.MinInt

// CompressLevel is Compress at a level, as Kafka's compression.gzip.level (1..9; -1 the
// default) and compression.zstd.level (zstd's scale, mapped onto the four levels the
// klauspost encoder implements: below 3 fastest, 3..5 default, 6..9 better, above best;
// DefaultLevel is 3). snappy has no levels; lz4 always uses the library's fast level.
func CompressLevel(codec int8, level int, dst, src []byte) ([]byte, error) {
	switch codec {
	case None:
		return append(dst, src...), nil
	case Gzip:
		return compressGzip(dst, src, level)
	case Snappy:
		return compressSnappy(dst, src)
	case LZ4:
		return compressLZ4(dst, src)
	case Zstd:
		if level == DefaultLevel {
			level = 3
		}
		return compressZstd(dst, src, level), nil
	}
	return dst, ErrUnknownCodec
}

// Decompress decompresses src with at most DefaultMaxBytes of output. The result never
// aliases src, except for codec None, where src itself is returned.
func Decompress(codec int8, src []byte) ([]byte, error) {
	return DecompressLimit(codec, src, DefaultMaxBytes)
}

// DecompressLimit decompresses src, failing with ErrTooLarge if the output would exceed
// maxBytes. For codec None, src is returned as is (still subject to the limit).
func DecompressLimit(codec int8, src []byte, maxBytes int) ([]byte, error) {
	return AppendDecompress(nil, codec, src, maxBytes)
}

// AppendDecompress appends the decompressed form of src to dst, failing with ErrTooLarge
// if more than maxBytes would be appended. On error the returned slice is nil. Passing a
// reused dst with spare capacity avoids allocating the output. For codec None with a nil
// dst, src itself is returned.
func AppendDecompress(dst []byte, codec int8, src []byte, maxBytes int) ([]byte, error) {
	if maxBytes < 0 {
		maxBytes = 0
	}
	var (
		out []byte
		err error
	)
	switch codec {
	case None:
		if len(src) > maxBytes {
			return nil, ErrTooLarge
		}
		if dst == nil {
			return src, nil
		}
		return append(dst, src...), nil
	case Gzip:
		out, err = decompressGzip(dst, src, maxBytes)
	case Snappy:
		out, err = decompressSnappy(dst, src, maxBytes)
	case LZ4:
		out, err = decompressLZ4(dst, src, maxBytes)
	case Zstd:
		out, err = decompressZstd(dst, src, maxBytes)
	default:
		return nil, ErrUnknownCodec
	}
	if err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// classify maps a library error onto ErrTooLarge or ErrCorrupt, keeping the cause.
func classify(err error) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrCorrupt) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrCorrupt, err)
}
