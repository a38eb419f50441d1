package log

import "path/filepath"

// WriteFileDurable replaces dir/name with data so that a crash leaves either the old or
// the new file whole: temporary file (name.tmp, which Open of a log in dir removes),
// fsync, rename, directory fsync. For small state files kept beside a log (raftstore's
// quorum-state and checkpoints).
func WriteFileDurable(dir, name string, data []byte) error {
	if err := writeFileAtomic(filepath.Join(dir, name), data); err != nil {
		return err
	}
	return syncDir(dir)
}

// SyncDir fsyncs the directory dir, making the creation, rename or removal of its
// entries durable.
func SyncDir(dir string) error { return syncDir(dir) }
