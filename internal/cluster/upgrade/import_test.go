package upgrade_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/cluster/upgrade"
	"github.com/exactq/exactq/internal/cluster/upgrade/fixture"
	"github.com/exactq/exactq/wire"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// importImage imports dir and applies the records to an empty image.
func importImage(t *testing.T, dir string, node int32) (*metadata.Image, []wire.MetadataRecord) {
	t.Helper()
	recs, err := upgrade.Import(dir, node)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	im, _, err := metadata.Apply(metadata.Empty(), recs)
	if err != nil {
		t.Fatalf("Apply of the imported records: %v", err)
	}
	return im, recs
}

// TestImportWhatTheBrokerWrote imports the directory the last broker with JSON metadata
// files wrote (the fixture) and checks the image says what that broker answered on the
// wire before it stopped.
func TestImportWhatTheBrokerWrote(t *testing.T) {
	dir := t.TempDir()
	want := fixture.Extract(t, dir)
	im, recs := importImage(t, dir, fixture.NodeID)
	if im.Cluster.ID != want.ClusterID || im.Cluster.CreatedMillis <= 0 {
		t.Errorf("cluster %+v, want id %s", im.Cluster, want.ClusterID)
	}
	if !reflect.DeepEqual(im.Features, want.Features) {
		t.Errorf("features %v, the broker finalized %v", im.Features, want.Features)
	}
	if len(im.TopicsByID) != len(want.Topics) {
		t.Errorf("%d topics imported, the broker had %d", len(im.TopicsByID), len(want.Topics))
	}
	for name, wt := range want.Topics {
		it := im.Topic(name)
		if it == nil {
			t.Errorf("topic %s not imported", name)
			continue
		}
		if it.ID != metadata.TopicID(wt.ID) || len(it.Partitions) != wt.Partitions {
			t.Errorf("topic %s: id %x, %d partitions; the broker: %x, %d", name, it.ID, len(it.Partitions), wt.ID, wt.Partitions)
		}
		for i, p := range it.Partitions {
			want := &metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1}
			if !reflect.DeepEqual(p, want) {
				t.Errorf("%s-%d: %+v, want %+v", name, i, p, want)
			}
		}
		got := im.Configs[metadata.ConfigResource{Type: metadata.ResourceTopic, Name: name}]
		if len(got) != 0 || len(wt.Configs) != 0 {
			if !reflect.DeepEqual(got, wt.Configs) {
				t.Errorf("topic %s configs %v, the broker: %v", name, got, wt.Configs)
			}
		}
	}
	if im.Topic("gone") != nil || im.Topic("grows") == nil || len(im.Topic("grows").Partitions) != 5 {
		t.Errorf("deleted or grown topic wrong: gone %v grows %v", im.Topic("gone"), im.Topic("grows"))
	}
	for g, want := range want.GroupConfigs {
		if got := im.Configs[metadata.ConfigResource{Type: metadata.ResourceGroup, Name: g}]; !reflect.DeepEqual(got, want) {
			t.Errorf("group %s configs %v, want %v", g, got, want)
		}
	}
	// The broker reserved one block at start and issued an id from it: the next block
	// starts at the block's end, above the id issued.
	if im.ProducerIDs.Next != 1000 || want.ProducerID >= im.ProducerIDs.Next || im.ProducerIDs.BrokerID != 1 {
		t.Errorf("producer ids %+v after issuing %d", im.ProducerIDs, want.ProducerID)
	}
	// The import is a checkpoint's order: the image gives back the same records.
	if back := im.Records(); !reflect.DeepEqual(back, recs) {
		t.Errorf("Import's records are not the image's own order:\n%v\n%v", recs, back)
	}
}

// writeFile writes a fixture file, making its directory.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// oldDir is a pre-cluster directory byte for byte as internal/broker writes one
// (json.MarshalIndent, two spaces), with a torn topic write (.tmp) beside the records.
func oldDir(t *testing.T) string {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "meta.json"), "{\n  \"version\": 1,\n  \"cluster_id\": \"q1w2e3r4t5y6u7i8o9p0aA\",\n  \"node_id\": 3\n}")
	writeFile(t, filepath.Join(dir, "features.json"), "{\n  \"version\": 1,\n  \"epoch\": 4,\n  \"levels\": {\n    \"share.version\": 1,\n    \"transaction.version\": 2\n  }\n}")
	writeFile(t, filepath.Join(dir, "producer-ids.json"), "{\n  \"reserved_up_to\": 5000\n}")
	writeFile(t, filepath.Join(dir, "group-configs.json"), "{\n  \"grp\": {\n    \"share.auto.offset.reset\": \"earliest\"\n  }\n}")
	writeFile(t, filepath.Join(dir, "topics", "b.json"), "{\n  \"name\": \"b\",\n  \"id\": \"00112233445566778899aabbccddeeff\",\n  \"partitions\": 2,\n  \"configs\": {\n    \"retention.ms\": \"1000\",\n    \"cleanup.policy\": \"compact\"\n  }\n}")
	writeFile(t, filepath.Join(dir, "topics", "a.json"), "{\n  \"name\": \"a\",\n  \"id\": \"ffeeddccbbaa99887766554433221100\",\n  \"partitions\": 1\n}")
	writeFile(t, filepath.Join(dir, "topics", "c.json.tmp"), "{\n  \"name\": \"c\",\n  \"id\": \"ff")
	for _, p := range []string{"a-0", "b-0", "b-1"} {
		writeFile(t, filepath.Join(dir, p, "00000000000000000000.log"), "")
	}
	return dir
}

func TestImportFixture(t *testing.T) {
	dir := oldDir(t)
	im, recs := importImage(t, dir, 3)
	part := func() *metadata.Partition {
		return &metadata.Partition{Replicas: []int32{3}, ISR: []int32{3}, Leader: 3}
	}
	a := metadata.TopicID{0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00}
	b := metadata.TopicID{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	st, _ := os.Stat(filepath.Join(dir, "meta.json"))
	want := &metadata.Image{
		Cluster:      metadata.Cluster{ID: "q1w2e3r4t5y6u7i8o9p0aA", CreatedMillis: st.ModTime().UnixMilli()},
		Brokers:      map[int32]*metadata.Broker{},
		TopicsByID:   map[metadata.TopicID]*metadata.Topic{a: {Name: "a", ID: a, Partitions: []*metadata.Partition{part()}}, b: {Name: "b", ID: b, Partitions: []*metadata.Partition{part(), part()}}},
		TopicsByName: map[string]metadata.TopicID{"a": a, "b": b},
		Configs: map[metadata.ConfigResource]map[string]string{
			{Type: metadata.ResourceTopic, Name: "b"}:   {"retention.ms": "1000", "cleanup.policy": "compact"},
			{Type: metadata.ResourceGroup, Name: "grp"}: {"share.auto.offset.reset": "earliest"},
		},
		Features:    map[string]int16{"share.version": 1, "transaction.version": 2},
		ProducerIDs: metadata.ProducerIDs{BrokerID: 3, BrokerEpoch: -1, Next: 5000},
	}
	if !reflect.DeepEqual(im, want) {
		t.Fatalf("imported image\n%+v\nwant\n%+v", im, want)
	}
	for _, r := range recs {
		if r.GetVersion() != r.MaxVersion() {
			t.Errorf("%s at version %d, not %d", r.Type(), r.GetVersion(), r.MaxVersion())
		}
	}
	// Import only reads: the torn write is still there for the old broker to remove.
	if _, err := os.Stat(filepath.Join(dir, "topics", "c.json.tmp")); err != nil {
		t.Errorf("Import touched the directory: %v", err)
	}
}

// TestImportAbsentFiles: a directory the broker formatted and never changed (meta.json
// and an empty topics/) imports as the broker reads it: initial features, nothing else.
func TestImportAbsentFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "meta.json"), `{"version":1,"cluster_id":"c","node_id":0}`)
	if err := os.Mkdir(filepath.Join(dir, "topics"), 0o755); err != nil {
		t.Fatal(err)
	}
	im, _ := importImage(t, dir, 0)
	if want := map[string]int16{"share.version": 1, "transaction.version": 2}; !reflect.DeepEqual(im.Features, want) {
		t.Errorf("features %v, want %v", im.Features, want)
	}
	if len(im.TopicsByID) != 0 || len(im.Configs) != 0 || im.ProducerIDs != (metadata.ProducerIDs{}) || im.Cluster.ID != "c" {
		t.Errorf("image %+v", im)
	}
}

// TestImportFeatureLevels: share.version 0 is not finalized (no record), and
// transaction.version is finalized at 2 whatever the file says, as the broker reads it.
func TestImportFeatureLevels(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "meta.json"), `{"version":1,"cluster_id":"c","node_id":1}`)
	writeFile(t, filepath.Join(dir, "features.json"), `{"version":1,"epoch":2,"levels":{"share.version":0}}`)
	im, _ := importImage(t, dir, 1)
	if want := map[string]int16{"transaction.version": 2}; !reflect.DeepEqual(im.Features, want) {
		t.Errorf("features %v, want %v", im.Features, want)
	}
}

func TestImportRefuses(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string
		is    error
	}{
		{name: "no meta.json", files: map[string]string{}, is: os.ErrNotExist},
		{name: "another node", files: map[string]string{"meta.json": `{"cluster_id":"c","node_id":2}`}, want: "belongs to node 2, not 1"},
		{name: "corrupt meta", files: map[string]string{"meta.json": `{"cluster_id":`}, want: "corrupt"},
		{name: "bad topic id", files: map[string]string{"topics/t.json": `{"name":"t","id":"abc","partitions":1}`}, want: `bad topic id "abc"`},
		{name: "one id twice", files: map[string]string{
			"topics/t.json": `{"name":"t","id":"00112233445566778899aabbccddeeff","partitions":1}`,
			"topics/u.json": `{"name":"u","id":"00112233445566778899aabbccddeeff","partitions":1}`}, want: "exists"},
		{name: "unsupported feature", files: map[string]string{"features.json": `{"levels":{"share.version":2}}`}, want: "share.version=2 is not a level this broker supports"},
		{name: "unknown feature", files: map[string]string{"features.json": `{"levels":{"metadata.version":20}}`}, want: "metadata.version=20"},
		{name: "negative bound", files: map[string]string{"producer-ids.json": `{"reserved_up_to":-1}`}, want: "bound -1"},
		{name: "corrupt group configs", files: map[string]string{"group-configs.json": `[`}, want: "corrupt"},
		{name: "upgraded", files: map[string]string{"topics": "marker"}, is: upgrade.ErrUpgraded},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, ok := c.files["meta.json"]; !ok && c.name != "no meta.json" {
				c.files["meta.json"] = `{"cluster_id":"c","node_id":1}`
			}
			for name, content := range c.files {
				writeFile(t, filepath.Join(dir, name), content)
			}
			_, err := upgrade.Import(dir, 1)
			switch {
			case err == nil:
				t.Fatal("imported")
			case c.is != nil && !errors.Is(err, c.is):
				t.Fatalf("error %v, want %v", err, c.is)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %v, want it to say %q", err, c.want)
			}
		})
	}
}
