package twopc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// PreparedTxnState identifies a prepared transaction: the producer id and epoch it was
// prepared under. Its String form "producerId:epoch" is Java's PreparedTxnState, so a
// state stored by a Java participant can be completed here and the other way round.
type PreparedTxnState struct {
	ProducerID int64
	Epoch      int16
}

var noPreparedTxnState = PreparedTxnState{ProducerID: -1, Epoch: -1}

// String is "producerId:epoch", or "" for the zero state (Java's toString).
func (s PreparedTxnState) String() string {
	if s.IsZero() {
		return ""
	}
	return strconv.FormatInt(s.ProducerID, 10) + ":" + strconv.FormatInt(int64(s.Epoch), 10)
}

// IsZero reports whether s names no transaction: -1/-1 (Java's empty state) or the zero
// value. Brokers never hand out producer id 0 to a transactional id, so no real state is
// the zero value.
func (s PreparedTxnState) IsZero() bool {
	return s.ProducerID < 0 || s == PreparedTxnState{}
}

// ParsePreparedTxnState parses String's form. "" is the zero state (-1/-1), as in Java;
// anything else must be "producerId:epoch" with both at least 0.
func ParsePreparedTxnState(s string) (PreparedTxnState, error) {
	if s == "" {
		return noPreparedTxnState, nil
	}
	pid, epoch, ok := strings.Cut(s, ":")
	if !ok || strings.Contains(epoch, ":") {
		return noPreparedTxnState, fmt.Errorf("twopc: invalid prepared transaction state %q: want producerId:epoch", s)
	}
	id, err1 := strconv.ParseInt(pid, 10, 64)
	ep, err2 := strconv.ParseInt(epoch, 10, 16)
	if err := errors.Join(err1, err2); err != nil {
		return noPreparedTxnState, fmt.Errorf("twopc: invalid prepared transaction state %q: %w", s, err)
	}
	if id < 0 || ep < 0 {
		return noPreparedTxnState, fmt.Errorf("twopc: invalid prepared transaction state %q: producer id and epoch must be >= 0", s)
	}
	return PreparedTxnState{ProducerID: id, Epoch: int16(ep)}, nil
}
