package sharepartition

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Config holds the effective per-group settings a share partition needs. The
// broker resolves group configs against broker defaults and min/max bounds
// (kip-932.md 5.1, 5.3) and passes the result; SetConfig changes them
// dynamically, with Kafka's semantics: a new lock duration applies to locks
// armed later, a lower delivery limit archives records on their next release,
// a lower record-lock cap stops new acquisitions until the window shrinks.
type Config struct {
	RecordLockDurationMs int64 // share.record.lock.duration.ms (default 30000)
	DeliveryCountLimit   int16 // share.delivery.count.limit (default 5)
	MaxInFlightRecords   int64 // share.partition.max.record.locks (default 2000)
	RenewEnabled         bool  // share.renew.acknowledge.enable (default true)
}

// DefaultConfig returns Kafka 4.4's broker defaults.
func DefaultConfig() Config {
	return Config{RecordLockDurationMs: 30000, DeliveryCountLimit: 5, MaxInFlightRecords: 2000, RenewEnabled: true}
}

func (c Config) validate() error {
	if c.RecordLockDurationMs <= 0 {
		return fmt.Errorf("record lock duration %d ms must be positive", c.RecordLockDurationMs)
	}
	if c.DeliveryCountLimit < 1 {
		return fmt.Errorf("delivery count limit %d must be at least 1", c.DeliveryCountLimit)
	}
	if c.MaxInFlightRecords < 1 {
		return fmt.Errorf("max in-flight records %d must be at least 1", c.MaxInFlightRecords)
	}
	return nil
}

// ResetKind is the strategy of share.auto.offset.reset.
type ResetKind int8

const (
	ResetLatest     ResetKind = iota // the default
	ResetEarliest                    //
	ResetByDuration                  // by_duration:<ISO-8601 duration>
)

// AutoOffsetReset is a parsed share.auto.offset.reset value. It decides the
// start offset of a share partition whose persisted StartOffset is -1
// (kip-932.md 2.9); the broker calls Resolve and passes the result to New.
type AutoOffsetReset struct {
	Kind     ResetKind
	Duration time.Duration // ResetByDuration only
}

// ParseAutoOffsetReset parses "latest", "earliest" or "by_duration:PnDTnHnMnS".
func ParseAutoOffsetReset(s string) (AutoOffsetReset, error) {
	switch {
	case s == "latest" || s == "":
		return AutoOffsetReset{Kind: ResetLatest}, nil
	case s == "earliest":
		return AutoOffsetReset{Kind: ResetEarliest}, nil
	case strings.HasPrefix(s, "by_duration:"):
		d, err := parseISODuration(strings.TrimPrefix(s, "by_duration:"))
		if err != nil {
			return AutoOffsetReset{}, fmt.Errorf("share.auto.offset.reset %q: %w", s, err)
		}
		return AutoOffsetReset{Kind: ResetByDuration, Duration: d}, nil
	}
	return AutoOffsetReset{}, fmt.Errorf("share.auto.offset.reset %q: want latest, earliest or by_duration:<ISO-8601 duration>", s)
}

// Resolve returns the start offset: the log end offset (latest), the log start
// offset (earliest), or the first offset with a timestamp at or after
// now-Duration (by_duration; offsetForTimestamp returns -1 when there is none,
// which resolves to the log end offset, as Kafka does).
func (r AutoOffsetReset) Resolve(logStartOffset, logEndOffset, nowMs int64, offsetForTimestamp func(tsMs int64) int64) int64 {
	switch r.Kind {
	case ResetEarliest:
		return logStartOffset
	case ResetByDuration:
		if off := offsetForTimestamp(nowMs - r.Duration.Milliseconds()); off >= 0 {
			return max(off, logStartOffset)
		}
	}
	return logEndOffset
}

// parseISODuration parses the subset of ISO-8601 durations Java's
// Duration.parse accepts: PnDTnHnMn.nS, each part optional, no negatives.
func parseISODuration(s string) (time.Duration, error) {
	if !strings.HasPrefix(s, "P") || len(s) < 3 {
		return 0, fmt.Errorf("duration %q is not ISO-8601 (PnDTnHnMnS)", s)
	}
	rest, timePart := s[1:], false
	var total time.Duration
	for len(rest) > 0 {
		if rest[0] == 'T' {
			if timePart {
				return 0, fmt.Errorf("duration %q has two T designators", s)
			}
			timePart, rest = true, rest[1:]
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 || i == len(rest) {
			return 0, fmt.Errorf("duration %q is malformed", s)
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
		var unit time.Duration
		switch u := rest[i]; {
		case u == 'D' && !timePart:
			unit = 24 * time.Hour
		case u == 'H' && timePart:
			unit = time.Hour
		case u == 'M' && timePart:
			unit = time.Minute
		case u == 'S' && timePart:
			unit = time.Second
		default:
			return 0, fmt.Errorf("duration %q has unit %q in the wrong place", s, u)
		}
		total += time.Duration(n * float64(unit))
		rest = rest[i+1:]
	}
	return total, nil
}
