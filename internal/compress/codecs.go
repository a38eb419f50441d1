package compress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// appendWriter is an io.Writer appending to a slice, so that streaming encoders write
// straight into the caller's dst.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// readLimited appends everything r yields to dst, failing with ErrTooLarge once more than
// maxBytes bytes were read. hint is a guess of the output size used for the first allocation.
func readLimited(dst []byte, r io.Reader, maxBytes, hint int) ([]byte, error) {
	start := len(dst)
	// We read at most max+1 bytes: one byte past the limit proves the output too large.
	limit := start + maxBytes + 1
	if limit < start { // overflow for max near MaxInt
		limit = int(^uint(0) >> 1)
	}
	dst = slices.Grow(dst, min(max(hint, 512), limit-start))
	const maxZeroReads = 100
	zeroReads := 0
	for {
		if len(dst) == cap(dst) {
			// Double what we have produced so far, bounded by the limit.
			produced := len(dst) - start
			dst = slices.Grow(dst, min(max(produced, 4096), limit-len(dst)))
		}
		room := min(cap(dst), limit) - len(dst)
		n, err := r.Read(dst[len(dst) : len(dst)+room])
		dst = dst[:len(dst)+n]
		if len(dst)-start > maxBytes {
			return nil, ErrTooLarge
		}
		switch {
		case err == io.EOF:
			return dst, nil
		case err != nil:
			return nil, err
		case n == 0:
			zeroReads++
			if zeroReads > maxZeroReads {
				return nil, io.ErrNoProgress
			}
		default:
			zeroReads = 0
		}
	}
}

// decodeHint guesses the decompressed size of src, for the first allocation.
func decodeHint(srcLen, maxBytes int) int {
	return min(srcLen*4, maxBytes, 1<<20)
}

// ---- gzip ----

type gzipDecoder struct {
	r   gzip.Reader
	src bytes.Reader
}

var gzipDecoders = sync.Pool{New: func() any { return new(gzipDecoder) }}

// gzipEncoders holds one pool per level: index 0 is gzip's default (-1), 1..9 the levels.
var gzipEncoders [10]sync.Pool

func init() {
	for i := range gzipEncoders {
		level := i
		if i == 0 {
			level = gzip.DefaultCompression
		}
		gzipEncoders[i].New = func() any {
			e := &gzipEncoder{}
			e.w, _ = gzip.NewWriterLevel(&e.out, level) // levels -1..9 are valid
			return e
		}
	}
}

type gzipEncoder struct {
	w   *gzip.Writer
	out appendWriter
}

// compressGzip compresses at level (1..9; anything else is gzip's default, as Kafka's -1).
func compressGzip(dst, src []byte, level int) ([]byte, error) {
	pool := &gzipEncoders[0]
	if level >= gzip.BestSpeed && level <= gzip.BestCompression {
		pool = &gzipEncoders[level]
	}
	e := pool.Get().(*gzipEncoder)
	defer pool.Put(e)
	e.out.b = dst
	e.w.Reset(&e.out)
	_, err := e.w.Write(src)
	if err == nil {
		err = e.w.Close()
	}
	out := e.out.b
	e.out.b = nil // do not keep the caller's buffer alive in the pool
	if err != nil {
		return dst, err
	}
	return out, nil
}

func decompressGzip(dst, src []byte, maxBytes int) ([]byte, error) {
	d := gzipDecoders.Get().(*gzipDecoder)
	defer gzipDecoders.Put(d)
	d.src.Reset(src)
	defer d.src.Reset(nil)
	if err := d.r.Reset(&d.src); err != nil {
		return nil, err
	}
	return readLimited(dst, &d.r, maxBytes, decodeHint(len(src), maxBytes))
}

// ---- snappy ----

// xerialMagic starts a snappy-java SnappyOutputStream stream; it is followed by two int32
// (version and minimum compatible version, both 1) and then the blocks.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderSize = 16

var errXerial = errors.New("malformed xerial snappy framing")

func compressSnappy(dst, src []byte) ([]byte, error) {
	n := s2.MaxEncodedLen(len(src))
	if n < 0 {
		return dst, errors.New("compress: input too large for a snappy block")
	}
	dst = slices.Grow(dst, n)
	// EncodeSnappy encodes into its dst argument when it is large enough.
	block := s2.EncodeSnappy(dst[len(dst):len(dst)+n], src)
	return dst[:len(dst)+len(block)], nil
}

func decompressSnappy(dst, src []byte, maxBytes int) ([]byte, error) {
	if len(src) >= xerialHeaderSize && bytes.HasPrefix(src, xerialMagic) {
		return decodeXerial(dst, src[xerialHeaderSize:], maxBytes)
	}
	return appendSnappyBlock(dst, src, maxBytes)
}

// appendSnappyBlock decodes one raw snappy block onto dst, checking the size it declares
// before allocating.
func appendSnappyBlock(dst, block []byte, maxBytes int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > maxBytes {
		return nil, ErrTooLarge
	}
	dst = slices.Grow(dst, n)
	out, err := snappy.DecodeStrict(dst[len(dst):len(dst)+n], block)
	if err != nil {
		return nil, err
	}
	if len(out) != n {
		return nil, errXerial
	}
	return dst[:len(dst)+n], nil
}

// decodeXerial decodes the blocks after the xerial header. It first walks the block
// headers to sum and bound the declared sizes, so dst grows once and a bomb is refused
// before anything is decoded.
func decodeXerial(dst, src []byte, maxBytes int) ([]byte, error) {
	total := 0
	for rem := src; len(rem) > 0; {
		if len(rem) < 4 {
			return nil, errXerial
		}
		size := binary.BigEndian.Uint32(rem)
		rem = rem[4:]
		if uint64(size) > uint64(len(rem)) {
			return nil, errXerial
		}
		n, err := snappy.DecodedLen(rem[:size])
		if err != nil {
			return nil, err
		}
		if n > maxBytes-total {
			return nil, ErrTooLarge
		}
		total += n
		rem = rem[size:]
	}
	dst = slices.Grow(dst, total)
	for len(src) > 0 {
		size := binary.BigEndian.Uint32(src)
		src = src[4:]
		var err error
		if dst, err = appendSnappyBlock(dst, src[:size], maxBytes); err != nil {
			return nil, err
		}
		src = src[size:]
	}
	return dst, nil
}

// ---- lz4 ----

type lz4Decoder struct {
	r   *lz4.Reader
	src bytes.Reader
}

type lz4Encoder struct {
	w   *lz4.Writer
	out appendWriter
}

var (
	lz4Decoders = sync.Pool{New: func() any { return &lz4Decoder{r: lz4.NewReader(nil)} }}
	lz4Encoders = sync.Pool{New: func() any {
		e := &lz4Encoder{}
		e.w = lz4.NewWriter(&e.out)
		return e
	}}
)

// lz4Options: 64 KiB independent blocks like Java's KafkaLZ4BlockOutputStream, which keeps
// the decoder's per-frame buffer small; one goroutine (the pierrec default).
var lz4Options = []lz4.Option{lz4.BlockSizeOption(lz4.Block64Kb), lz4.ConcurrencyOption(1)}

func compressLZ4(dst, src []byte) ([]byte, error) {
	e := lz4Encoders.Get().(*lz4Encoder)
	defer lz4Encoders.Put(e)
	e.out.b = dst
	e.w.Reset(&e.out)
	err := e.w.Apply(lz4Options...)
	if err == nil {
		_, err = e.w.Write(src)
	}
	if err == nil {
		err = e.w.Close()
	}
	out := e.out.b
	e.out.b = nil
	if err != nil {
		return dst, err
	}
	return out, nil
}

func decompressLZ4(dst, src []byte, maxBytes int) ([]byte, error) {
	d := lz4Decoders.Get().(*lz4Decoder)
	defer lz4Decoders.Put(d)
	d.src.Reset(src)
	defer d.src.Reset(nil)
	d.r.Reset(&d.src)
	return readLimited(dst, d.r, maxBytes, decodeHint(len(src), maxBytes))
}

// ---- zstd ----

// zstd decoders bound their output with WithDecoderMaxMemory, fixed at construction, so
// they are pooled per power-of-two limit class; the exact limit is checked after decoding.
// A frame declaring a content size over the class is refused before any allocation; one
// without a declared size stops once it outgrows the class. The decoder also caps a frame's
// window at the class, and Java's zstd-jni streams declare windows up to 8 MiB (level 19,
// size unknown) even for tiny contents, so the smallest class is 8 MiB: a bomb costs at
// most max(8 MiB, 2 x the caller's limit).
const zstdMinClass = 23 // 8 MiB

var zstdDecoders [64]sync.Pool

type zstdDecoder struct{ d *zstd.Decoder }

func zstdClass(maxBytes int) int {
	if maxBytes <= 1<<zstdMinClass {
		return zstdMinClass
	}
	return bits.Len(uint(maxBytes - 1))
}

func getZstdDecoder(class int) *zstdDecoder {
	if v := zstdDecoders[class].Get(); v != nil {
		return v.(*zstdDecoder)
	}
	d, err := zstd.NewReader(nil,
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(uint64(1)<<class),
	)
	if err != nil {
		panic("compress: zstd decoder options: " + err.Error()) // static options
	}
	zd := &zstdDecoder{d: d}
	runtime.SetFinalizer(zd, func(zd *zstdDecoder) { zd.d.Close() })
	return zd
}

func decompressZstd(dst, src []byte, maxBytes int) ([]byte, error) {
	class := zstdClass(maxBytes)
	zd := getZstdDecoder(class)
	defer zstdDecoders[class].Put(zd)
	start := len(dst)
	out, err := zd.d.DecodeAll(src, dst)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return nil, ErrTooLarge
	}
	if err != nil {
		return nil, err
	}
	if len(out)-start > maxBytes {
		return nil, ErrTooLarge
	}
	return out, nil
}

type zstdEncoder struct{ e *zstd.Encoder }

// zstdEncoders holds one pool per klauspost encoder level (SpeedFastest..SpeedBestCompression,
// index level-1): the library implements four levels, and a zstd level (Kafka's
// compression.zstd.level) maps onto one with zstd.EncoderLevelFromZstd.
var zstdEncoders [zstd.SpeedBestCompression]sync.Pool

func init() {
	for i := range zstdEncoders {
		level := zstd.EncoderLevel(i + 1)
		zstdEncoders[i].New = func() any {
			e, err := zstd.NewWriter(nil,
				zstd.WithEncoderConcurrency(1),
				zstd.WithZeroFrames(true),
				zstd.WithWindowSize(1<<20),
				zstd.WithEncoderLevel(level),
			)
			if err != nil {
				panic("compress: zstd encoder options: " + err.Error()) // static options
			}
			ze := &zstdEncoder{e: e}
			runtime.SetFinalizer(ze, func(ze *zstdEncoder) { ze.e.Close() })
			return ze
		}
	}
}

// compressZstd compresses at the klauspost level closest to zstd level (DefaultLevel: 3).
func compressZstd(dst, src []byte, level int) []byte {
	pool := &zstdEncoders[zstd.EncoderLevelFromZstd(level)-1]
	ze := pool.Get().(*zstdEncoder)
	defer pool.Put(ze)
	return ze.e.EncodeAll(src, dst)
}
