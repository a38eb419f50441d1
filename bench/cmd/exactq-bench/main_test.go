package main

import (
	"strings"
	"testing"
)

func TestBenchArgs(t *testing.T) {
	got := benchArgs([]string{"-b", "h:1", "--b=h:2", "-brokers", "h:3", "-records", "5", "--", "-b"})
	want := []string{"-brokers", "h:1", "-brokers=h:2", "-brokers", "h:3", "-records", "5", "--", "-b"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("benchArgs: %q, want %q", got, want)
	}
}
