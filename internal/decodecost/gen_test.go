package decodecost

import (
	"bytes"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGeneratedIsFresh fails when requests_gen.go is not what franzgen writes now (the
// generator or the franz-go definitions changed): run `go generate ./internal/decodecost`.
func TestGeneratedIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator")
	}
	want, err := exec.Command("go", "run", "../franzgen", "decodecost").Output()
	if err != nil {
		t.Fatalf("go run ../franzgen decodecost: %v", err)
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

// TestFranzDefinitionsAreKmsgs proves that the definitions the walkers are generated from
// are the ones kmsg v1.15.1 was generated from: franz-go's own generator, run on them,
// writes kmsg's generated.go again (comments aside: their gofmt style differs between Go
// versions). The generator is copied to a temporary module and run there.
func TestFranzDefinitionsAreKmsgs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs franz-go's generator")
	}
	franzDir := goListDir(t, "github.com/twmb/franz-go")
	kmsgDir := goListDir(t, "github.com/twmb/franz-go/pkg/kmsg")
	tmp := t.TempDir()
	if err := os.CopyFS(tmp, os.DirFS(filepath.Join(franzDir, "generate"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "go.mod"), []byte("module franzgen\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("franz-go generator: %v", err)
	}
	generated, err := format.Source(out)
	if err != nil {
		t.Fatalf("gofmt franz-go generator output: %v", err)
	}
	kmsgGenerated, err := os.ReadFile(filepath.Join(kmsgDir, "generated.go"))
	if err != nil {
		t.Fatal(err)
	}
	got, want := codeLines(generated), codeLines(kmsgGenerated)
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("franz-go's generator and kmsg's generated.go differ at code line %d:\n%s\n%s", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("franz-go's generator writes %d code lines, kmsg's generated.go has %d", len(got), len(want))
	}
}

func goListDir(t *testing.T, module string) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	return strings.TrimSpace(string(out))
}

// codeLines is src without comment-only lines.
func codeLines(src []byte) []string {
	var out []string
	for _, line := range strings.Split(string(src), "\n") {
		if trimmed := strings.TrimSpace(line); !strings.HasPrefix(trimmed, "//") {
			out = append(out, line)
		}
	}
	return out
}
