package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A stored checkpoint loads back whole, a missing file is the empty first checkpoint, and
// no temporary file is left behind.
func TestCheckpointFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.ckpt")
	empty, err := loadCheckpoint(path)
	if err != nil || empty.ID != 0 || len(empty.Counts) != 0 || empty.EOS != nil {
		t.Fatalf("missing file: %+v, %v", empty, err)
	}
	want := checkpoint{ID: 7, Counts: map[string]int64{"a": 3}, EOS: []byte{1, 2, 3}}
	if err := storeCheckpoint(path, want); err != nil {
		t.Fatal(err)
	}
	if got, err := loadCheckpoint(path); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %+v, %v; want %+v", got, err, want)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCheckpoint(path); err == nil {
		t.Fatal("a corrupt checkpoint file loaded")
	}
}
