package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWrite: the content and mode land, an existing file is replaced, no
// temporary file stays, and a directory that does not exist is an error
// naming the path.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if err != nil || string(b) != "new" || fi.Mode().Perm() != 0o600 {
		t.Errorf("after Write: %q, mode %v, %v", b, fi.Mode().Perm(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(ents))
	}
	missing := filepath.Join(dir, "no", "f")
	if err := Write(missing, []byte("x"), 0o644); err == nil {
		t.Error("Write into a missing directory succeeded")
	}
}
