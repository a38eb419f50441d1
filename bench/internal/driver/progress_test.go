package driver

import (
	"bytes"
	"strings"
	"testing"
)

// TestProgressPlain checks the non-terminal output: a line per step, log lines as they
// are, and no terminal control characters.
func TestProgressPlain(t *testing.T) {
	var b bytes.Buffer
	p := NewProgress(&b, false)
	p.every = 0
	p.Begin("P3 share 4c", "kafka-4.4", 2, 3, 100)
	p.Set(40)
	p.Write([]byte("a log line\n"))
	p.Begin("P7 setup: write log", "exactq fsync never", 0, 3, 10)
	p.Close()
	out := b.String()
	for _, want := range []string{"[P3 share 4c] kafka-4.4, run 2/3\n", "[P3 share 4c] kafka-4.4, run 2/3: 40/100 (0:00)\n", "a log line\n", "[P7 setup: write log] exactq fsync never, setup\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\r\033") {
		t.Errorf("control characters in plain output: %q", out)
	}
}

// TestProgressTTY checks the bar: redrawn in place, cleared around log lines and at the end.
func TestProgressTTY(t *testing.T) {
	var b bytes.Buffer
	p := &Progress{w: &b, tty: true} // no ticker: draws happen on Begin, Set and Write only
	p.Begin("P1 produce 8p", "exactq fsync always", 1, 3, 200)
	p.Set(50)
	if !strings.Contains(b.String(), "\r\033[K") || !strings.Contains(b.String(), "[======") || !strings.Contains(b.String(), " 25% ") {
		t.Errorf("bar at 25%%: %q", b.String())
	}
	b.Reset()
	p.Write([]byte("log\n"))
	if got := b.String(); !strings.HasPrefix(got, "\r\033[Klog\n\r\033[K") {
		t.Errorf("log line over the bar: %q", got)
	}
	b.Reset()
	p.Close()
	if b.String() != "\r\033[K" {
		t.Errorf("close: %q", b.String())
	}
	if line := p.line(24); !strings.Contains(line, "P1 produce 8p") || !strings.Contains(line, "exactq fsync always") || !strings.Contains(line, "run 1/3") {
		t.Errorf("line %q", line)
	}
}
