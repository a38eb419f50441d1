// Package testdisk gives a test a small file system it can fill, to see what a full disk
// (ENOSPC on a write or an fsync) does to a log or a broker. It mounts a tmpfs, which
// needs root; elsewhere the tests that use it skip.
package testdisk

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Small mounts a tmpfs of sizeBytes on a new temporary directory and returns its path; the
// mount goes when the test ends. It skips the test when it cannot mount (not root, or no
// mount privilege).
func Small(t testing.TB, sizeBytes int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs to fill needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(sizeBytes)); err != nil {
		t.Skipf("cannot mount a tmpfs (%v): a full disk cannot be simulated here", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// Fill writes the file name in dir until the file system has at most leaveBytes free (0:
// until it is full to the last byte, partial blocks included) and returns a function that
// removes the file, giving the space back.
func Fill(t testing.TB, dir, name string, leaveBytes int64) (free func()) {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	if leaveBytes > 0 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		for fill := int64(st.Bavail)*st.Bsize - leaveBytes; fill > 0; {
			n, err := f.Write(buf[:min(int64(len(buf)), fill)])
			if err != nil {
				t.Fatalf("filling %s: %v", dir, err)
			}
			fill -= int64(n)
		}
	} else {
		// Ever smaller writes until not even one byte fits.
		for _, n := range []int{len(buf), 64 << 10, 4096, 512, 1} {
			for {
				_, err := f.Write(buf[:n])
				if err == nil {
					continue
				}
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling %s: %v", dir, err)
				}
				break
			}
		}
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Errorf("removing the filler %s: %v", path, err)
		}
	}
}
