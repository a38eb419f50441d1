package decodecost

import (
	"bytes"
	"os"
	"os/exec"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGeneratedIsFresh fails when requests_gen.go is not what ./gen writes now (the
// generator or the franz-go definitions changed): run `go generate ./internal/decodecost`.
func TestGeneratedIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator")
	}
	want, err := exec.Command("go", "run", "./gen").Output()
	if err != nil {
		t.Fatalf("go run ./gen: %v", err)
	}
	have, err := os.ReadFile("requests_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatal("requests_gen.go is stale: run go generate ./internal/decodecost")
	}
}

// TestRequestsMatchKmsg: the walkers cover exactly the request keys kmsg decodes, with
// kmsg's highest version each, and flexible from the same version as kmsg.
func TestRequestsMatchKmsg(t *testing.T) {
	seen := 0
	for key := int16(-1); key <= kmsg.MaxKey+1; key++ {
		req := kmsg.RequestForKey(key)
		maxVersion, walked := requestMaxVersions[key]
		if (req != nil) != walked {
			t.Fatalf("key %d: kmsg has it %v, walkers have it %v", key, req != nil, walked)
		}
		if req == nil {
			continue
		}
		seen++
		if req.MaxVersion() != maxVersion {
			t.Errorf("%s: kmsg max version %d, walkers %d", kmsg.NameForKey(key), req.MaxVersion(), maxVersion)
		}
	}
	if seen != len(requestMaxVersions) {
		t.Fatalf("walkers for %d keys, kmsg decodes %d", len(requestMaxVersions), seen)
	}
}
