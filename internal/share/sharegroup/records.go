package sharegroup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Record types of share groups in __consumer_offsets: the "apiKey" of Kafka 4.4's
// coordinator record schemas (group-coordinator/src/main/resources/common/message/
// ShareGroup*Key.json), written as the key's leading int16 by
// MessageUtil.toCoordinatorTypePrefixedBytes. Keys are version 0, not flexible; values
// are version-prefixed (int16 0) and flexible (compact strings and arrays, tagged fields).
const (
	recMemberMetadata           int16 = 10 // ShareGroupMemberMetadata{Key,Value}
	recMetadata                 int16 = 11 // ShareGroupMetadata{Key,Value}
	recTargetAssignmentMetadata int16 = 12 // ShareGroupTargetAssignmentMetadata{Key,Value}
	recTargetAssignmentMember   int16 = 13 // ShareGroupTargetAssignmentMember{Key,Value}
	recCurrentMemberAssignment  int16 = 14 // ShareGroupCurrentMemberAssignment{Key,Value}
	recStatePartitionMetadata   int16 = 15 // ShareGroupStatePartitionMetadata{Key,Value}
)

// isShareRecordType reports whether a __consumer_offsets key type belongs to share groups.
func isShareRecordType(t int16) bool { return t >= recMemberMetadata && t <= recStatePartitionMetadata }

// recordKey is the decoded key of any share-group record. MemberID is empty for the
// group-level types (11, 12, 15).
type recordKey struct {
	Type     int16
	GroupID  string
	MemberID string
}

func hasMember(t int16) bool {
	return t == recMemberMetadata || t == recTargetAssignmentMember || t == recCurrentMemberAssignment
}

// TopicPartitions is one topic's partitions in an assignment record.
type TopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

// memberMetadataValue is ShareGroupMemberMetadataValue v0.
type memberMetadataValue struct {
	RackID               *string
	ClientID, ClientHost string
	SubscribedTopicNames []string
}

// metadataValue is ShareGroupMetadataValue v0.
type metadataValue struct {
	Epoch        int32
	MetadataHash int64
}

// targetAssignmentMetadataValue is ShareGroupTargetAssignmentMetadataValue v0; the
// timestamp is tagged field 0 (KIP-1263, 4.3+), written only when non-zero.
type targetAssignmentMetadataValue struct {
	AssignmentEpoch       int32
	AssignmentTimestampMs int64
}

// targetAssignmentMemberValue is ShareGroupTargetAssignmentMemberValue v0.
type targetAssignmentMemberValue struct {
	TopicPartitions []TopicPartitions
}

// currentMemberAssignmentValue is ShareGroupCurrentMemberAssignmentValue v0.
type currentMemberAssignmentValue struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	AssignedPartitions  []TopicPartitions
}

// initTopic is a TopicPartitionsInfo of ShareGroupStatePartitionMetadataValue.
type initTopic struct {
	TopicID    [16]byte
	TopicName  string
	Partitions []int32
}

// deletingTopic is a TopicInfo of ShareGroupStatePartitionMetadataValue.
type deletingTopic struct {
	TopicID   [16]byte
	TopicName string
}

// statePartitionMetadataValue is ShareGroupStatePartitionMetadataValue v0.
type statePartitionMetadataValue struct {
	InitializingTopics []initTopic
	InitializedTopics  []initTopic
	DeletingTopics     []deletingTopic
}

// ---- encoding ----

func encodeKey(k recordKey) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(k.Type))
	b = appendString16(b, k.GroupID)
	if hasMember(k.Type) {
		b = appendString16(b, k.MemberID)
	}
	return b
}

func appendString16(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendCompactString(b []byte, s string) []byte {
	b = appendUvarint(b, uint64(len(s))+1)
	return append(b, s...)
}

func appendCompactNullableString(b []byte, s *string) []byte {
	if s == nil {
		return appendUvarint(b, 0)
	}
	return appendCompactString(b, *s)
}

func appendInt32s(b []byte, xs []int32) []byte {
	b = appendUvarint(b, uint64(len(xs))+1)
	for _, x := range xs {
		b = binary.BigEndian.AppendUint32(b, uint32(x))
	}
	return b
}

func appendNoTags(b []byte) []byte { return append(b, 0) }

func valuePrefix() []byte { return []byte{0, 0} } // value version 0

func appendTopicPartitions(b []byte, tps []TopicPartitions) []byte {
	b = appendUvarint(b, uint64(len(tps))+1)
	for _, tp := range tps {
		b = append(b, tp.TopicID[:]...)
		b = appendInt32s(b, tp.Partitions)
		b = appendNoTags(b)
	}
	return b
}

func (v *memberMetadataValue) encode() []byte {
	b := valuePrefix()
	b = appendCompactNullableString(b, v.RackID)
	b = appendCompactString(b, v.ClientID)
	b = appendCompactString(b, v.ClientHost)
	b = appendUvarint(b, uint64(len(v.SubscribedTopicNames))+1)
	for _, s := range v.SubscribedTopicNames {
		b = appendCompactString(b, s)
	}
	return appendNoTags(b)
}

func (v *metadataValue) encode() []byte {
	b := valuePrefix()
	b = binary.BigEndian.AppendUint32(b, uint32(v.Epoch))
	b = binary.BigEndian.AppendUint64(b, uint64(v.MetadataHash))
	return appendNoTags(b)
}

func (v *targetAssignmentMetadataValue) encode() []byte {
	b := valuePrefix()
	b = binary.BigEndian.AppendUint32(b, uint32(v.AssignmentEpoch))
	if v.AssignmentTimestampMs == 0 { // the default is not written (Java's generated code)
		return appendNoTags(b)
	}
	b = appendUvarint(b, 1) // one tagged field
	b = appendUvarint(b, 0) // tag 0
	b = appendUvarint(b, 8) // size
	return binary.BigEndian.AppendUint64(b, uint64(v.AssignmentTimestampMs))
}

func (v *targetAssignmentMemberValue) encode() []byte {
	b := valuePrefix()
	b = appendTopicPartitions(b, v.TopicPartitions)
	return appendNoTags(b)
}

func (v *currentMemberAssignmentValue) encode() []byte {
	b := valuePrefix()
	b = binary.BigEndian.AppendUint32(b, uint32(v.MemberEpoch))
	b = binary.BigEndian.AppendUint32(b, uint32(v.PreviousMemberEpoch))
	b = append(b, byte(v.State))
	b = appendTopicPartitions(b, v.AssignedPartitions)
	return appendNoTags(b)
}

func appendInitTopics(b []byte, ts []initTopic) []byte {
	b = appendUvarint(b, uint64(len(ts))+1)
	for _, t := range ts {
		b = append(b, t.TopicID[:]...)
		b = appendCompactString(b, t.TopicName)
		b = appendInt32s(b, t.Partitions)
		b = appendNoTags(b)
	}
	return b
}

func (v *statePartitionMetadataValue) encode() []byte {
	b := valuePrefix()
	b = appendInitTopics(b, v.InitializingTopics)
	b = appendInitTopics(b, v.InitializedTopics)
	b = appendUvarint(b, uint64(len(v.DeletingTopics))+1)
	for _, t := range v.DeletingTopics {
		b = append(b, t.TopicID[:]...)
		b = appendCompactString(b, t.TopicName)
		b = appendNoTags(b)
	}
	return appendNoTags(b)
}

// ---- decoding ----

var errShort = errors.New("sharegroup: record truncated")

// maxDecodedElements bounds every decoded array so a corrupt length cannot allocate
// unbounded memory: no share-group record legitimately holds more than this many
// topics, partitions or names.
const maxDecodedElements = 1 << 20

type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.fail(errShort)
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) int8() int8 {
	if b := r.take(1); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *reader) int16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) int32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) int64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *reader) uuid() (u [16]byte) {
	if b := r.take(16); b != nil {
		copy(u[:], b)
	}
	return u
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string16() string {
	n := r.int16()
	if n < 0 {
		r.fail(errors.New("sharegroup: null string in key"))
		return ""
	}
	return string(r.take(int(n)))
}

// compactLen reads a compact length (n+1); it returns -1 for null.
func (r *reader) compactLen() int {
	v := r.uvarint()
	if r.err != nil {
		return 0
	}
	if v > maxDecodedElements+1 {
		r.fail(fmt.Errorf("sharegroup: length %d too large", v-1))
		return 0
	}
	return int(v) - 1
}

func (r *reader) compactString() string {
	n := r.compactLen()
	if n < 0 {
		r.fail(errors.New("sharegroup: null in a non-nullable string"))
		return ""
	}
	return string(r.take(n))
}

func (r *reader) compactNullableString() *string {
	n := r.compactLen()
	if n < 0 || r.err != nil {
		return nil
	}
	s := string(r.take(n))
	return &s
}

func (r *reader) arrayLen() int {
	n := r.compactLen()
	if n < 0 {
		r.fail(errors.New("sharegroup: null in a non-nullable array"))
		return 0
	}
	return n
}

func (r *reader) int32s() []int32 {
	n := r.arrayLen()
	if r.err != nil || n*4 > len(r.b) {
		r.fail(errShort)
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = r.int32()
	}
	return out
}

// skipTags reads a tagged-field section; fn handles known tags and reports whether it
// consumed the field.
func (r *reader) skipTags(fn func(tag uint64, data []byte) bool) {
	n := r.uvarint()
	if n > maxDecodedElements {
		r.fail(errShort)
		return
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		tag := r.uvarint()
		size := r.uvarint()
		if size > uint64(len(r.b)) {
			r.fail(errShort)
			return
		}
		data := r.take(int(size))
		if fn != nil {
			fn(tag, data)
		}
	}
}

func (r *reader) topicPartitions() []TopicPartitions {
	n := r.arrayLen()
	if r.err != nil || n*18 > len(r.b) {
		r.fail(errShort)
		return nil
	}
	out := make([]TopicPartitions, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		tp := TopicPartitions{TopicID: r.uuid(), Partitions: r.int32s()}
		r.skipTags(nil)
		out = append(out, tp)
	}
	return out
}

func (r *reader) initTopics() []initTopic {
	n := r.arrayLen()
	if r.err != nil || n*19 > len(r.b) {
		r.fail(errShort)
		return nil
	}
	out := make([]initTopic, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		t := initTopic{TopicID: r.uuid(), TopicName: r.compactString(), Partitions: r.int32s()}
		r.skipTags(nil)
		out = append(out, t)
	}
	return out
}

func (r *reader) done(what string) error {
	if r.err != nil {
		return fmt.Errorf("sharegroup: %s: %w", what, r.err)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("sharegroup: %s: %d trailing bytes", what, len(r.b))
	}
	return nil
}

// decodeKey decodes a share-group record key. It returns ok=false (and no error) for
// keys of other record types, which belong to other coordinators.
func decodeKey(b []byte) (k recordKey, ok bool, err error) {
	r := &reader{b: b}
	k.Type = r.int16()
	if r.err != nil {
		return k, false, fmt.Errorf("sharegroup: key: %w", r.err)
	}
	if !isShareRecordType(k.Type) {
		return k, false, nil
	}
	k.GroupID = r.string16()
	if hasMember(k.Type) {
		k.MemberID = r.string16()
	}
	return k, true, r.done("key")
}

func valueReader(b []byte, what string) (*reader, error) {
	r := &reader{b: b}
	if v := r.int16(); r.err == nil && v != 0 {
		return nil, fmt.Errorf("sharegroup: %s: unknown value version %d", what, v)
	}
	return r, nil
}

func decodeMemberMetadata(b []byte) (v memberMetadataValue, err error) {
	r, err := valueReader(b, "member metadata")
	if err != nil {
		return v, err
	}
	v.RackID = r.compactNullableString()
	v.ClientID = r.compactString()
	v.ClientHost = r.compactString()
	n := r.arrayLen()
	if r.err == nil && n > len(r.b) {
		r.fail(errShort)
	}
	for i := 0; i < n && r.err == nil; i++ {
		v.SubscribedTopicNames = append(v.SubscribedTopicNames, r.compactString())
	}
	if v.SubscribedTopicNames == nil && r.err == nil {
		v.SubscribedTopicNames = []string{}
	}
	r.skipTags(nil)
	return v, r.done("member metadata")
}

func decodeMetadata(b []byte) (v metadataValue, err error) {
	r, err := valueReader(b, "group metadata")
	if err != nil {
		return v, err
	}
	v.Epoch = r.int32()
	v.MetadataHash = r.int64()
	r.skipTags(nil)
	return v, r.done("group metadata")
}

func decodeTargetAssignmentMetadata(b []byte) (v targetAssignmentMetadataValue, err error) {
	r, err := valueReader(b, "target assignment metadata")
	if err != nil {
		return v, err
	}
	v.AssignmentEpoch = r.int32()
	r.skipTags(func(tag uint64, data []byte) bool {
		if tag != 0 {
			return false
		}
		if len(data) != 8 {
			r.fail(errors.New("bad AssignmentTimestamp size"))
			return true
		}
		v.AssignmentTimestampMs = int64(binary.BigEndian.Uint64(data))
		return true
	})
	return v, r.done("target assignment metadata")
}

func decodeTargetAssignmentMember(b []byte) (v targetAssignmentMemberValue, err error) {
	r, err := valueReader(b, "target assignment member")
	if err != nil {
		return v, err
	}
	v.TopicPartitions = r.topicPartitions()
	r.skipTags(nil)
	return v, r.done("target assignment member")
}

func decodeCurrentMemberAssignment(b []byte) (v currentMemberAssignmentValue, err error) {
	r, err := valueReader(b, "current member assignment")
	if err != nil {
		return v, err
	}
	v.MemberEpoch = r.int32()
	v.PreviousMemberEpoch = r.int32()
	v.State = r.int8()
	v.AssignedPartitions = r.topicPartitions()
	r.skipTags(nil)
	return v, r.done("current member assignment")
}

func decodeStatePartitionMetadata(b []byte) (v statePartitionMetadataValue, err error) {
	r, err := valueReader(b, "state partition metadata")
	if err != nil {
		return v, err
	}
	v.InitializingTopics = r.initTopics()
	v.InitializedTopics = r.initTopics()
	n := r.arrayLen()
	if r.err == nil && n*18 > len(r.b) {
		r.fail(errShort)
	}
	for i := 0; i < n && r.err == nil; i++ {
		t := deletingTopic{TopicID: r.uuid(), TopicName: r.compactString()}
		r.skipTags(nil)
		v.DeletingTopics = append(v.DeletingTopics, t)
	}
	r.skipTags(nil)
	return v, r.done("state partition metadata")
}

// ---- assignment helpers shared by records and the core ----

// Assignment maps a topic id to its sorted partitions. A nil or empty Assignment is
// "no partitions"; an entry never holds an empty slice.
type Assignment map[[16]byte][]int32

func (a Assignment) clone() Assignment {
	out := make(Assignment, len(a))
	for t, ps := range a {
		out[t] = slices.Clone(ps)
	}
	return out
}

func (a Assignment) equal(b Assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for t, ps := range a {
		if !slices.Equal(ps, b[t]) {
			return false
		}
	}
	return true
}

func (a Assignment) has(topic [16]byte, p int32) bool {
	_, ok := slices.BinarySearch(a[topic], p)
	return ok
}

func (a Assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// sortedTopics lists a's topics in byte order (the order records and responses use).
func (a Assignment) sortedTopics() [][16]byte {
	ts := make([][16]byte, 0, len(a))
	for t := range a {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(x, y [16]byte) int { return compareIDs(x, y) })
	return ts
}

func compareIDs(x, y [16]byte) int {
	for i := range x {
		if x[i] != y[i] {
			if x[i] < y[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

func (a Assignment) toRecord() []TopicPartitions {
	out := make([]TopicPartitions, 0, len(a))
	for _, t := range a.sortedTopics() {
		out = append(out, TopicPartitions{TopicID: t, Partitions: slices.Clone(a[t])})
	}
	return out
}

func assignmentFromRecord(tps []TopicPartitions) Assignment {
	a := Assignment{}
	for _, tp := range tps {
		if len(tp.Partitions) == 0 {
			continue
		}
		ps := append(a[tp.TopicID], tp.Partitions...)
		slices.Sort(ps)
		a[tp.TopicID] = slices.Compact(ps)
	}
	return a
}
