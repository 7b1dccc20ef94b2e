package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/swift-rdma/swift-containerd/keys"
)

// keysCmd runs `swiftctl keys ARGS...` and appends what it printed to out.
func keysCmd(out *bytes.Buffer, args ...string) error {
	var se bytes.Buffer
	_, err := run(context.Background(), append([]string{"keys"}, args...), out, &se)
	return err
}

// TestKeysGenRotateShow: gen writes a ring of one key, rotate puts a new
// key first and keeps two, show prints fingerprints and never a key.
func TestKeysGenRotateShow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t1.keys")
	var out bytes.Buffer
	if err := keysCmd(&out, "gen", "--id", "k1", path); err != nil {
		t.Fatalf("gen: %v", err)
	}
	if !regexp.MustCompile(`^k1\t[0-9a-f]{16}\tdial, accepted\n$`).MatchString(out.String()) {
		t.Fatalf("gen printed %q", out.String())
	}
	if err := keysCmd(&out, "gen", path); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("gen over an existing ring = %v, want a refusal", err)
	}
	for _, id := range []string{"k2", "k3"} {
		out.Reset()
		if err := keysCmd(&out, "rotate", "--id", id, path); err != nil {
			t.Fatalf("rotate %s: %v", id, err)
		}
	}
	if !regexp.MustCompile(`^k3\t[0-9a-f]{16}\tdial, accepted\nk2\t[0-9a-f]{16}\taccepted\n$`).MatchString(out.String()) {
		t.Fatalf("after two rotations show printed %q, want k3 then k2", out.String())
	}
	r, err := keys.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range r {
		if bytes.Contains(out.Bytes(), []byte(hex.EncodeToString(k.Key))) {
			t.Fatal("show printed a key")
		}
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o400 {
		t.Errorf("ring mode %04o, want 0400", st.Mode().Perm())
	}
	if err := keysCmd(&out, "rotate", "--id", "k3", path); err == nil {
		t.Fatal("rotate with an id already in the ring succeeded")
	}
	if err := keysCmd(&out, "show", filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("show of a missing file succeeded")
	}
}
