package upgrade_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/upgrade"
)

// tree is every file under dir (path relative to dir → content; directories as "/").
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			out[rel] = "/"
			return nil
		}
		b, err := os.ReadFile(path)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPartitionMetadataFormat(t *testing.T) {
	id := metadata.TopicID{0xfb, 0xff, 0x01, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}
	// Kafka's Uuid.toString: URL-safe base64 without padding ('-' and '_', no '=').
	want := "version: 0\ntopic_id: -_8BAgMEBQYHCAkKCwwNDg\n"
	if got := string(upgrade.PartitionMetadata(id)); got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	back, err := upgrade.ParsePartitionMetadata([]byte(want))
	if err != nil || back != id {
		t.Fatalf("parse: %x %v", back, err)
	}
	// Kafka's reader splits "key: value" at ':' and whitespace.
	if back, err := upgrade.ParsePartitionMetadata([]byte("version:0\ntopic_id:   -_8BAgMEBQYHCAkKCwwNDg")); err != nil || back != id {
		t.Fatalf("parse without the spaces: %x %v", back, err)
	}
	for _, bad := range []string{"", "version: 1\ntopic_id: -_8BAgMEBQYHCAkKCwwNDg\n", "version: 0\ntopic_id: abc\n", "topic_id: -_8BAgMEBQYHCAkKCwwNDg\nversion: 0\n", "version: 0\n"} {
		if _, err := upgrade.ParsePartitionMetadata([]byte(bad)); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}

// finished is what the fixture directory looks like once the upgrade is done.
func finished(t *testing.T) map[string]string {
	t.Helper()
	dir := oldDir(t)
	im, _ := importImage(t, dir, 3)
	before := tree(t, dir)
	if err := upgrade.Finish(dir, im, 3); err != nil {
		t.Fatal(err)
	}
	got := tree(t, dir)
	ida := string(upgrade.PartitionMetadata(im.TopicsByName["a"]))
	idb := string(upgrade.PartitionMetadata(im.TopicsByName["b"]))
	want := map[string]string{
		"pre-cluster": "/",
		"a-0":         "/", "a-0/00000000000000000000.log": "", "a-0/partition.metadata": ida,
		"b-0": "/", "b-0/00000000000000000000.log": "", "b-0/partition.metadata": idb,
		"b-1": "/", "b-1/00000000000000000000.log": "", "b-1/partition.metadata": idb,
		"meta.json": before["meta.json"],
		"topics":    got["topics"],
	}
	for _, name := range []string{"features.json", "producer-ids.json", "group-configs.json", "topics/a.json", "topics/b.json", "topics/c.json.tmp"} {
		want["pre-cluster/"+name] = before[name]
	}
	want["pre-cluster/topics"] = "/"
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after Finish:\n%v\nwant\n%v", got, want)
	}
	if !strings.Contains(got["topics"], "pre-cluster/") {
		t.Fatalf("marker says %q", got["topics"])
	}
	return got
}

// TestFinishTwice: the finished directory is left as it is by a second run.
func TestFinishTwice(t *testing.T) {
	want := finished(t)
	dir := oldDir(t)
	im, _ := importImage(t, dir, 3)
	for i := range 2 {
		if err := upgrade.Finish(dir, im, 3); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if got := tree(t, dir); !reflect.DeepEqual(got, want) {
			t.Fatalf("run %d:\n%v\nwant\n%v", i, got, want)
		}
	}
	// An older exactq's first step on the directory fails on the marker.
	if err := os.MkdirAll(filepath.Join(dir, "topics"), 0o755); err == nil {
		t.Fatal("MkdirAll(topics) succeeded on an upgraded directory")
	}
	// And Import refuses it: its topics are no longer where the old broker kept them.
	if _, err := upgrade.Import(dir, 3); !errors.Is(err, upgrade.ErrUpgraded) {
		t.Fatalf("Import of an upgraded directory: %v", err)
	}
}

// TestFinishFromEveryCrashPoint: the directory as a crash leaves it after each step of
// Finish (each step done in the order Finish does them, a torn temporary file where one
// is being written) is finished by running Finish again.
func TestFinishFromEveryCrashPoint(t *testing.T) {
	want := finished(t)
	steps := []struct {
		name string
		do   func(t *testing.T, dir string, im *metadata.Image)
	}{
		{"torn partition.metadata.tmp", func(t *testing.T, dir string, im *metadata.Image) {
			writeFile(t, filepath.Join(dir, "a-0", "partition.metadata.tmp"), "version: 0\ntop")
		}},
		{"one partition tagged", func(t *testing.T, dir string, im *metadata.Image) {
			if err := upgrade.WritePartitionID(filepath.Join(dir, "b-1"), im.TopicsByName["b"]); err != nil {
				t.Fatal(err)
			}
		}},
		{"every partition tagged", func(t *testing.T, dir string, im *metadata.Image) {
			if err := upgrade.WritePartitionMetadata(dir, im, 3); err != nil {
				t.Fatal(err)
			}
		}},
		{"pre-cluster made", func(t *testing.T, dir string, im *metadata.Image) {
			mkdir(t, filepath.Join(dir, "pre-cluster"))
		}},
		{"features moved", func(t *testing.T, dir string, im *metadata.Image) { move(t, dir, "features.json") }},
		{"producer ids moved", func(t *testing.T, dir string, im *metadata.Image) { move(t, dir, "producer-ids.json") }},
		{"group configs moved", func(t *testing.T, dir string, im *metadata.Image) { move(t, dir, "group-configs.json") }},
		{"topics moved", func(t *testing.T, dir string, im *metadata.Image) { move(t, dir, "topics") }},
		{"torn marker", func(t *testing.T, dir string, im *metadata.Image) {
			writeFile(t, filepath.Join(dir, "topics.tmp"), "This data")
		}},
	}
	for n := 1; n <= len(steps); n++ {
		t.Run(steps[n-1].name, func(t *testing.T) {
			dir := oldDir(t)
			im, _ := importImage(t, dir, 3)
			for _, s := range steps[:n] {
				s.do(t, dir, im)
			}
			if err := upgrade.Finish(dir, im, 3); err != nil {
				t.Fatal(err)
			}
			if got := tree(t, dir); !reflect.DeepEqual(got, want) {
				t.Fatalf("after a crash past %q and Finish:\n%v\nwant\n%v", steps[n-1].name, got, want)
			}
		})
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func move(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, "pre-cluster", name)); err != nil {
		t.Fatal(err)
	}
}

// TestFinishKeepsAnotherTopicsData: a partition directory already tagged with another
// topic id is not overwritten (its data is that topic's).
func TestFinishKeepsAnotherTopicsData(t *testing.T) {
	dir := oldDir(t)
	im, _ := importImage(t, dir, 3)
	other := upgrade.PartitionMetadata(metadata.TopicID{9})
	writeFile(t, filepath.Join(dir, "b-0", "partition.metadata"), string(other))
	if err := upgrade.Finish(dir, im, 3); !errors.Is(err, upgrade.ErrInconsistentTopicID) {
		t.Fatalf("Finish: %v, want ErrInconsistentTopicID", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b-0", "partition.metadata")); string(b) != string(other) {
		t.Fatalf("partition.metadata rewritten: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "topics", "a.json")); err != nil {
		t.Fatalf("the old files moved although the upgrade failed: %v", err)
	}
}

// TestWritePartitionMetadataSkips: partitions this node does not hold and partitions
// without a directory get no file (and no directory).
func TestWritePartitionMetadataSkips(t *testing.T) {
	dir := oldDir(t)
	im, _ := importImage(t, dir, 3)
	if err := upgrade.WritePartitionMetadata(dir, im, 4); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "b-1")); err != nil {
		t.Fatal(err)
	}
	before := tree(t, dir)
	if err := upgrade.WritePartitionMetadata(dir, im, 4); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, dir); !reflect.DeepEqual(got, before) {
		t.Fatalf("node 4 holds nothing, yet:\n%v", got)
	}
	if err := upgrade.WritePartitionMetadata(dir, im, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("b-1 made: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "b-0", "partition.metadata")); err != nil {
		t.Fatal(err)
	}
}
