package await

import (
	"errors"
	"io/fs"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	err := Until(10*time.Second, time.Millisecond, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("Until = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestUntilGivesUpWithTheLastError(t *testing.T) {
	calls := 0
	start := time.Now()
	err := Until(50*time.Millisecond, 5*time.Millisecond, func() error {
		calls++
		return fs.ErrNotExist
	})
	took := time.Since(start)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Until = %v, want the condition's error", err)
	}
	if took < 50*time.Millisecond || calls < 2 {
		t.Fatalf("gave up after %v and %d calls, want at least 50ms and 2 calls", took, calls)
	}
}

func TestUntilStopsAtAStopError(t *testing.T) {
	calls := 0
	err := Until(10*time.Second, time.Millisecond, func() error {
		calls++
		return Stop(fs.ErrPermission)
	})
	if calls != 1 || !errors.Is(err, fs.ErrPermission) || err.Error() != fs.ErrPermission.Error() {
		t.Fatalf("Until = %v after %d calls, want %v after 1", err, calls, fs.ErrPermission)
	}
}

func TestUntilCallsOnceWithoutTime(t *testing.T) {
	calls := 0
	if err := Until(0, time.Hour, func() error { calls++; return errors.New("no") }); err == nil || calls != 1 {
		t.Fatalf("Until(0) = %v after %d calls, want an error after 1", err, calls)
	}
}

func TestStopOfNilIsSuccess(t *testing.T) {
	if err := Until(time.Second, time.Millisecond, func() error { return Stop(nil) }); err != nil {
		t.Fatalf("Until(Stop(nil)) = %v, want nil", err)
	}
}
