package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVendoredIsFranzGos fails when the copy here is no longer franz-go's generator of the
// version go.mod requires (franz-go was bumped, or a vendored file was edited): parse.go,
// gen.go and LICENSE are byte for byte franz-go's, and main.go is franz-go's up to its
// main function, without the imports only that function used. After a bump, copy
// generate/ again (cmd.go says what changes) and run go generate ./wire ./internal/decodecost.
func TestVendoredIsFranzGos(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", franzModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", franzModule, err)
	}
	dir := strings.TrimSpace(string(out))
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, name := range []string{"parse.go", "gen.go"} {
		if read(name) != read(filepath.Join(dir, "generate", name)) {
			t.Errorf("%s differs from %s's generate/%s", name, franzModule, name)
		}
	}
	if read("LICENSE") != read(filepath.Join(dir, "LICENSE")) {
		t.Errorf("LICENSE differs from %s's", franzModule)
	}

	upstream := read(filepath.Join(dir, "generate", "main.go"))
	cut := strings.Index(upstream, "\n//go:generate ")
	if cut < 0 {
		t.Fatal("franz-go's generate/main.go has no go:generate line before its main")
	}
	want := strings.TrimRight(upstream[:cut], "\n") + "\n"
	for _, imp := range []string{`"path/filepath"`, `"sort"`, `"strings"`} {
		want = strings.Replace(want, "\t"+imp+"\n", "", 1)
	}
	if read("main.go") != want {
		t.Error("main.go is not franz-go's generate/main.go without its main function (and the imports only main used)")
	}
}
