package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// checkpoint is what the program's checkpoint file holds: its own operator state and the
// eos snapshot of the transaction prepared with it. Both are stored in one atomic write,
// so they always belong together: that is what makes the counts and the outputs agree
// after a crash.
type checkpoint struct {
	ID     int64            `json:"id"`
	Counts map[string]int64 `json:"counts"`
	// EOS is eos.Checkpointer.SnapshotState (base64 in the file); nil before the first
	// checkpoint.
	EOS []byte `json:"eos,omitempty"`
}

// loadCheckpoint reads the last completed checkpoint; a missing file is the empty
// checkpoint of a first start.
func loadCheckpoint(path string) (checkpoint, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint{Counts: map[string]int64{}}, nil
	}
	if err != nil {
		return checkpoint{}, err
	}
	var cp checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return checkpoint{}, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if cp.Counts == nil {
		cp.Counts = map[string]int64{}
	}
	return cp, nil
}

// storeCheckpoint completes a checkpoint: it writes a temporary file, fsyncs it, renames
// it over path and fsyncs the directory. Before the rename the previous checkpoint is the
// one a restart sees, after it this one; the fsyncs make that true across power loss.
func storeCheckpoint(path string, cp checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
