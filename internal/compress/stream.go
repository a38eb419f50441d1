package compress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/bits"
	"runtime"
	"sync"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// Reader decompresses one payload as a stream, so a caller that only walks the output
// (the produce path's validation) holds a bounded window of it, never all of it. It stops
// with ErrTooLarge once more than its limit would be produced: a 1 MiB bomb costs as much
// CPU as its limit, not as its content. Decoders come from pools; Close gives them back.
//
// Memory per Reader (MemoryBound): gzip about 64 KiB; lz4 two blocks of the frame's
// declared block size (at most 8 MiB); zstd the frame's window (at most
// max(8 MiB, limit)) plus two 128 KiB blocks; snappy the largest block it declares (a raw
// snappy block is the whole payload: its format cannot be decoded in pieces), refused
// before allocation when over the limit.
type Reader struct {
	codec     int8
	leftBytes int // output still allowed; the Reader fails once it would go below zero
	src       bytes.Reader
	dec       io.Reader // gzip, lz4 or zstd decoder reading src

	gz   *gzipDecoder
	lz   *lz4Decoder
	zd   *zstdDecoder
	zcls int

	// snappy: the current decoded block and the xerial blocks still to decode.
	block    []byte
	blockPos int
	xerial   []byte
	buf      *[]byte // pooled backing of block
}

// NewReader returns a Reader over src (compressed with codec) producing at most maxBytes.
// Errors found before any output (an unknown codec, a snappy or zstd header declaring more
// than maxBytes, a malformed header) are returned here; the rest by Read.
func NewReader(codec int8, src []byte, maxBytes int) (*Reader, error) {
	r := &Reader{codec: codec, leftBytes: min(max(maxBytes, 0), math.MaxInt-1)}
	r.src.Reset(src)
	var err error
	switch codec {
	case None:
		r.dec = &r.src
	case Gzip:
		r.gz = gzipDecoders.Get().(*gzipDecoder)
		if err = r.gz.r.Reset(&r.src); err == nil {
			r.gz.r.Multistream(true)
			r.dec = &r.gz.r
		}
	case LZ4:
		r.lz = lz4Decoders.Get().(*lz4Decoder)
		r.lz.r.Reset(&r.src)
		r.dec = r.lz.r
	case Zstd:
		err = r.openZstd(src, maxBytes)
	case Snappy:
		err = r.openSnappy(src, maxBytes)
	default:
		err = ErrUnknownCodec
	}
	if err != nil {
		r.Close()
		return nil, classify(err)
	}
	return r, nil
}

// Read implements io.Reader. Its errors are io.EOF at the end, ErrTooLarge, or ErrCorrupt
// (wrapping the codec's error).
func (r *Reader) Read(p []byte) (int, error) {
	if r.leftBytes < 0 {
		return 0, ErrTooLarge
	}
	// One byte past the limit proves the output too large.
	p = p[:min(len(p), r.leftBytes+1)]
	var n int
	var err error
	if r.dec != nil {
		n, err = r.dec.Read(p)
	} else {
		n, err = r.readSnappy(p)
	}
	r.leftBytes -= n
	switch {
	case r.leftBytes < 0:
		return n, ErrTooLarge
	case err == nil || err == io.EOF:
		return n, err
	case errors.Is(err, zstd.ErrDecoderSizeExceeded), errors.Is(err, zstd.ErrWindowSizeExceeded):
		return n, ErrTooLarge
	}
	return n, classify(err)
}

// Whole returns the entire output when the Reader already holds it (a raw snappy block,
// decoded whole), so a caller can read it in place instead of copying it out; after Whole
// the Reader is at its end.
func (r *Reader) Whole() ([]byte, bool) {
	if r.codec != Snappy || r.xerial != nil || r.blockPos != 0 {
		return nil, false
	}
	r.blockPos = len(r.block)
	return r.block, true
}

// Close returns the Reader's decoders and buffers to their pools. The Reader must not be
// used after.
func (r *Reader) Close() {
	r.src.Reset(nil)
	if r.gz != nil {
		gzipDecoders.Put(r.gz)
	}
	if r.lz != nil {
		r.lz.r.Reset(nil)
		lz4Decoders.Put(r.lz)
	}
	if r.zd != nil {
		_ = r.zd.d.Reset(nil)
		zstdStreamDecoders[r.zcls].Put(r.zd)
	}
	if r.buf != nil && cap(*r.buf) <= maxPooledSnappyBytes {
		snappyBuffers.Put(r.buf)
	}
	*r = Reader{leftBytes: -1}
}

// ---- memory bounds ----

// MemoryBound returns how many bytes a Reader over src may hold while it runs (decoder
// state and buffers, by the rules in Reader's comment), for a caller that budgets
// decompression memory. It reads only headers.
func MemoryBound(codec int8, src []byte, maxBytes int) int {
	switch codec {
	case Gzip:
		return gzipMemoryBytes
	case LZ4:
		return 2 * lz4BlockBytes(src)
	case Zstd:
		window, err := zstdWindow(src, maxBytes)
		if len(src) == 0 || err != nil {
			return 0 // NewReader refuses it before decoding anything
		}
		return 1<<zstdStreamClass(window) + 2*zstdBlockBytes
	case Snappy:
		n, err := snappyBlockBytes(src, maxBytes)
		if err != nil {
			return 0
		}
		return n
	}
	return 0
}

// gzipMemoryBytes: the 32 KiB window of flate plus its tables and the reader's buffers.
const gzipMemoryBytes = 64 << 10

// lz4BlockBytes is the block size the first LZ4 frame declares (its BD byte), or the
// largest one when the header cannot be read.
func lz4BlockBytes(src []byte) int {
	const largest = 4 << 20
	if len(src) < 6 || binary.LittleEndian.Uint32(src) != 0x184D2204 {
		return largest
	}
	switch (src[5] >> 4) & 7 {
	case 4:
		return 64 << 10
	case 5:
		return 256 << 10
	case 6:
		return 1 << 20
	}
	return largest
}

// ---- zstd ----

// zstdBlockBytes is the largest zstd block (RFC 8878: 128 KiB).
const zstdBlockBytes = 128 << 10

// zstdStreamMinClass: streaming decoders are pooled per power-of-two window class from
// 64 KiB. Java's zstd-jni streams declare windows up to 8 MiB (level 19, size unknown)
// even for tiny contents, so windows up to 8 MiB are always accepted, and up to the limit
// beyond that (a single-segment frame's window is its content size).
const (
	zstdStreamMinClass = 16
	zstdStreamMaxClass = 23 // 8 MiB
)

var zstdStreamDecoders [64]sync.Pool

// zstdWindow is the window the first frame of src needs, refusing one over the limit.
func zstdWindow(src []byte, maxBytes int) (int, error) {
	var h zstd.Header
	if err := h.Decode(src); err != nil {
		return 0, err
	}
	window := h.WindowSize
	if h.SingleSegment {
		if h.FrameContentSize > uint64(maxBytes) {
			return 0, ErrTooLarge // the frame says it holds more than the limit
		}
		window = h.FrameContentSize
	}
	if window > uint64(max(maxBytes, 1<<zstdStreamMaxClass)) {
		return 0, ErrTooLarge
	}
	return int(window), nil
}

func zstdStreamClass(window int) int {
	return max(bits.Len(uint(max(window, 1)-1)), zstdStreamMinClass)
}

func (r *Reader) openZstd(src []byte, maxBytes int) error {
	if len(src) == 0 { // no frame: no output, as DecodeAll has it
		r.dec = &r.src
		return nil
	}
	window, err := zstdWindow(src, maxBytes)
	if err != nil {
		return err
	}
	// Later frames may not need a larger window than the first: the decoder refuses
	// them (ErrTooLarge), which keeps MemoryBound true. Clients write one frame.
	r.zcls = zstdStreamClass(window)
	if v := zstdStreamDecoders[r.zcls].Get(); v != nil {
		r.zd = v.(*zstdDecoder)
	} else {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderConcurrency(1), // decode in the caller's goroutine
			zstd.WithDecoderMaxWindow(uint64(1)<<r.zcls),
			zstd.WithDecoderMaxMemory(uint64(1)<<r.zcls),
		)
		if err != nil {
			panic("compress: zstd decoder options: " + err.Error()) // static options
		}
		r.zd = &zstdDecoder{d: d}
		runtime.SetFinalizer(r.zd, func(zd *zstdDecoder) { zd.d.Close() })
	}
	// A *bytes.Reader, not a *bytes.Buffer: the decoder decodes a Buffer whole.
	if err := r.zd.d.Reset(&r.src); err != nil {
		return err
	}
	r.dec = r.zd.d
	return nil
}

// ---- snappy ----

// maxPooledSnappyBytes bounds the snappy buffers kept for reuse.
const maxPooledSnappyBytes = 4 << 20

var snappyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// snappyBlockBytes is the largest decoded block src declares: the whole output for a raw
// block, the largest block for xerial framing. It refuses a total over maxBytes.
func snappyBlockBytes(src []byte, maxBytes int) (int, error) {
	if !isXerial(src) {
		n, err := snappy.DecodedLen(src)
		if err != nil {
			return 0, err
		}
		if n > maxBytes {
			return 0, ErrTooLarge
		}
		return n, nil
	}
	largest, total := 0, 0
	for rem := src[xerialHeaderSize:]; len(rem) > 0; {
		block, rest, err := nextXerialBlock(rem)
		if err != nil {
			return 0, err
		}
		n, err := snappy.DecodedLen(block)
		if err != nil {
			return 0, err
		}
		if n > maxBytes-total {
			return 0, ErrTooLarge
		}
		total += n
		largest = max(largest, n)
		rem = rest
	}
	return largest, nil
}

func isXerial(src []byte) bool {
	return len(src) >= xerialHeaderSize && bytes.HasPrefix(src, xerialMagic)
}

// nextXerialBlock cuts the first length-prefixed block of xerial framing.
func nextXerialBlock(src []byte) (block, rest []byte, err error) {
	if len(src) < 4 {
		return nil, nil, errXerial
	}
	size := binary.BigEndian.Uint32(src)
	if uint64(size) > uint64(len(src)-4) {
		return nil, nil, errXerial
	}
	return src[4 : 4+size], src[4+size:], nil
}

func (r *Reader) openSnappy(src []byte, maxBytes int) error {
	largest, err := snappyBlockBytes(src, maxBytes)
	if err != nil {
		return err
	}
	r.buf = snappyBuffers.Get().(*[]byte)
	if cap(*r.buf) < largest {
		*r.buf = make([]byte, 0, largest)
	}
	if isXerial(src) {
		r.xerial = src[xerialHeaderSize:]
		return nil
	}
	return r.decodeSnappyBlock(src)
}

func (r *Reader) decodeSnappyBlock(block []byte) error {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return err
	}
	out, err := snappy.DecodeStrict((*r.buf)[:n], block)
	if err != nil {
		return err
	}
	if len(out) != n {
		return errXerial
	}
	r.block, r.blockPos = out, 0
	return nil
}

func (r *Reader) readSnappy(p []byte) (int, error) {
	for r.blockPos == len(r.block) {
		if len(r.xerial) == 0 {
			return 0, io.EOF
		}
		block, rest, err := nextXerialBlock(r.xerial)
		if err != nil {
			return 0, err
		}
		r.xerial = rest
		if err := r.decodeSnappyBlock(block); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.block[r.blockPos:])
	r.blockPos += n
	return n, nil
}
