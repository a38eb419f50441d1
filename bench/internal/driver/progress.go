package driver

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Progress shows where a suite is. On a terminal it keeps one line at the bottom, redrawn
// in place: workload, system, run i/n, a bar of records done (when the step has a total)
// and the elapsed time; other output (log lines written to it) scrolls above it. Elsewhere
// (a file, a pipe, CI) it writes plain lines: one when a step begins and one at most every
// few seconds with its count.
type Progress struct {
	w     io.Writer
	tty   bool
	every time.Duration // non-TTY: least time between count lines

	mu         sync.Mutex
	label, sys string
	run, runs  int
	done, tot  int
	start      time.Time
	lastLine   time.Time
	drawn      bool
	stopTicker chan struct{}
}

// NewProgress writes to w, drawing a bar when tty is set.
func NewProgress(w io.Writer, tty bool) *Progress {
	p := &Progress{w: w, tty: tty, every: 5 * time.Second}
	if tty {
		p.stopTicker = make(chan struct{})
		go p.tick()
	}
	return p
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func (p *Progress) tick() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stopTicker:
			return
		case <-t.C:
			p.mu.Lock()
			if p.drawn {
				p.draw()
			}
			p.mu.Unlock()
		}
	}
}

// Begin starts a step: label (e.g. "P3 share 4c"), the system, run i of n (0: a setup
// step) and the records it will count to (0: no bar).
func (p *Progress) Begin(label, system string, run, runs, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label, p.sys, p.run, p.runs, p.tot, p.done = label, system, run, runs, total, 0
	p.start, p.lastLine = time.Now(), time.Now()
	if p.tty {
		p.draw()
		return
	}
	fmt.Fprintf(p.w, "[%s] %s, %s\n", p.label, p.sys, p.runText())
}

// Set reports the step's count.
func (p *Progress) Set(done int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = done
	if p.tty {
		p.draw()
		return
	}
	if time.Since(p.lastLine) >= p.every {
		p.lastLine = time.Now()
		fmt.Fprintf(p.w, "[%s] %s, %s: %d/%d (%s)\n", p.label, p.sys, p.runText(), p.done, p.tot, elapsed(time.Since(p.start)))
	}
}

// Write prints log output above the bar.
func (p *Progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.drawn {
		io.WriteString(p.w, "\r\033[K")
	}
	n, err := p.w.Write(b)
	if p.tty && p.drawn {
		p.draw()
	}
	return n, err
}

// Close clears the bar and stops redrawing.
func (p *Progress) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopTicker != nil {
		close(p.stopTicker)
		p.stopTicker = nil
	}
	if p.tty && p.drawn {
		io.WriteString(p.w, "\r\033[K")
		p.drawn = false
	}
}

func (p *Progress) runText() string {
	if p.run == 0 {
		return "setup"
	}
	return fmt.Sprintf("run %d/%d", p.run, p.runs)
}

// line is the bar's text (width columns at most for the bar part).
func (p *Progress) line(width int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-22s %-20s %-9s ", p.label, p.sys, p.runText())
	if p.tot > 0 {
		f := min(1, float64(p.done)/float64(p.tot))
		full := int(f * float64(width))
		b.WriteString("[" + strings.Repeat("=", full) + strings.Repeat(" ", width-full) + "]")
		fmt.Fprintf(&b, " %3.0f%% ", 100*f)
	}
	b.WriteString(elapsed(time.Since(p.start)))
	return b.String()
}

func (p *Progress) draw() {
	io.WriteString(p.w, "\r\033[K"+p.line(24))
	p.drawn = true
}

// elapsed formats d as m:ss.
func elapsed(d time.Duration) string {
	s := int(d.Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
