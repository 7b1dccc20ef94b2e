//go:build e2e

package harness

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// TestFilesFromDir: a tree on disk becomes image entries, kinds and
// permission bits kept.
func TestFilesFromDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "usr/bin/tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	got, err := FilesFromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]File{
		"usr":          {Mode: fs.ModeDir | 0o750},
		"usr/bin":      {Mode: fs.ModeDir | 0o750},
		"usr/bin/tool": {Mode: 0o755, Data: []byte("#!/bin/sh\n")},
		"bin":          {Mode: fs.ModeSymlink | 0o777, Link: "usr/bin"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FilesFromDir = %v, want %v", got, want)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FilesFromDir(dir); err == nil {
		t.Error("FilesFromDir with a FIFO in the tree: no error")
	}
}
