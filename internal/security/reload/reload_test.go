package reload

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// sum parses files of integers and adds them up; a file that is not a number fails.
func sum(contents [][]byte) (int, error) {
	total := 0
	for _, c := range contents {
		n, err := strconv.Atoi(strings.TrimSpace(string(c)))
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write(t, a, "1")
	write(t, b, "2")
	t0 := time.Unix(1000, 0)
	var errs []error
	f, err := New([]string{a, b}, sum, t0, Options{Interval: time.Second, OnError: func(err error) { errs = append(errs, err) }})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Get(t0); got != 3 {
		t.Fatalf("first value %d", got)
	}
	// Rewritten at once with the same size: within the interval nothing is looked at,
	// after it the new contents are seen although the size (and likely the time) did
	// not change.
	write(t, a, "5")
	if got := f.Get(t0.Add(500 * time.Millisecond)); got != 3 {
		t.Fatalf("looked within the interval: %d", got)
	}
	if got := f.Get(t0.Add(time.Second)); got != 7 {
		t.Fatalf("after the interval: %d", got)
	}
	// A file that does not parse keeps the last value and is reported; fixed, it is used.
	write(t, b, "x")
	if got := f.Get(t0.Add(2 * time.Second)); got != 7 || len(errs) != 1 {
		t.Fatalf("broken file: %d, %d errors", got, len(errs))
	}
	write(t, b, "10")
	if got := f.Get(t0.Add(3 * time.Second)); got != 15 {
		t.Fatalf("fixed file: %d", got)
	}
	// A clock stepped back by an interval counts as time passed.
	write(t, b, "20")
	if got := f.Get(t0.Add(-time.Hour)); got != 25 {
		t.Fatalf("clock stepped back: %d", got)
	}
	// A missing file is reported the same way.
	os.Remove(a)
	if got := f.Get(t0.Add(4 * time.Second)); got != 25 || len(errs) != 2 {
		t.Fatalf("missing file: %d, %d errors", got, len(errs))
	}
}

func TestNewFails(t *testing.T) {
	dir := t.TempDir()
	if _, err := New([]string{filepath.Join(dir, "none")}, sum, time.Now(), Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	p := filepath.Join(dir, "bad")
	write(t, p, "x")
	if _, err := New([]string{p}, sum, time.Now(), Options{}); err == nil {
		t.Fatal("a file that does not parse was accepted")
	}
}
