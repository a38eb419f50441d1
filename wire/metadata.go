package wire

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// MetadataRecord is a KRaft metadata record (definitions/metadata): RegisterBrokerRecord,
// TopicRecord, PartitionChangeRecord and the others of MetadataRecordType.
type MetadataRecord interface {
	// Type is the record's type, KRaft's apiKey for it.
	Type() MetadataRecordType
	// MaxVersion is the highest version this package encodes (Kafka 4.4's).
	MaxVersion() int16
	GetVersion() int16
	SetVersion(int16)
	// AppendBodyTo appends the body at the record's version, without the frame.
	AppendBodyTo([]byte) []byte
	// ReadBodyFrom decodes a body at version; UnsafeReadBodyFrom aliases strings into it.
	ReadBodyFrom(src []byte, version int16) error
	UnsafeReadBodyFrom(src []byte, version int16) error
}

// MetadataFrameVersion is the frame version of KRaft's MetadataRecordSerde, the only one
// it reads (0 was 2.8's preview).
const MetadataFrameVersion = 1

var (
	// ErrMetadataFrame: the frame before a record is not frame version 1, its type or
	// version does not fit an int16, or it is cut short.
	ErrMetadataFrame = errors.New("wire: bad metadata record frame")
	// ErrUnknownMetadataRecord: a record type this package has no struct for, or a version
	// above its MaxVersion.
	ErrUnknownMetadataRecord = errors.New("wire: unknown metadata record type or version")
	// ErrMetadataTrailing: bytes are left after a record's body.
	ErrMetadataTrailing = errors.New("wire: bytes after a metadata record's body")
)

// AppendMetadataRecord appends r framed as KRaft frames a record value in
// __cluster_metadata (AbstractApiMessageSerde.write): the frame version, r's type and
// version as unsigned varints, then r's body.
func AppendMetadataRecord(dst []byte, r MetadataRecord) []byte {
	dst = kbin.AppendUvarint(dst, MetadataFrameVersion)
	dst = kbin.AppendUvarint(dst, uint32(r.Type()))
	dst = kbin.AppendUvarint(dst, uint32(r.GetVersion()))
	return r.AppendBodyTo(dst)
}

// ReadMetadataRecord decodes a framed record (as AppendMetadataRecord writes it; the
// whole of src), refusing what KRaft's reader refuses: another frame version, a type or
// version above 32767, a type it does not know, a version above the type's, bytes left
// after the body. With unsafe, the record's strings alias src.
func ReadMetadataRecord(src []byte, unsafe bool) (MetadataRecord, error) {
	t, version, body, err := MetadataRecordFrame(src)
	if err != nil {
		return nil, err
	}
	r := NewMetadataRecord(t)
	if r == nil || version > r.MaxVersion() {
		return nil, fmt.Errorf("%w: type %d version %d", ErrUnknownMetadataRecord, t, version)
	}
	if unsafe {
		err = r.UnsafeReadBodyFrom(body, version)
	} else {
		err = r.ReadBodyFrom(body, version)
	}
	if err != nil {
		return nil, fmt.Errorf("wire: %s v%d: %w", t, version, err)
	}
	return r, nil
}

// MetadataRecordFrame splits a framed record into its type, version and body, without
// decoding the body.
func MetadataRecordFrame(src []byte) (t MetadataRecordType, version int16, body []byte, err error) {
	b := kbin.Reader{Src: src}
	frame, key, v := b.Uvarint(), b.Uvarint(), b.Uvarint()
	if !b.Ok() || frame != MetadataFrameVersion || key > 1<<15-1 || v > 1<<15-1 {
		return 0, 0, nil, ErrMetadataFrame
	}
	return MetadataRecordType(key), int16(v), b.Src, nil
}
