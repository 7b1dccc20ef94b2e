package annotations

import (
	"os"
	"path/filepath"
	"testing"
)

// TestZygoteLimitsHeader: zygote/swift-limits.h says what limits.go says.
func TestZygoteLimitsHeader(t *testing.T) {
	path := filepath.Join("..", "zygote", "swift-limits.h")
	want := ZygoteLimitsHeader()
	if os.Getenv("SWIFT_WRITE_LIMITS") == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is stale (SWIFT_WRITE_LIMITS=1 go test ./annotations -run TestZygoteLimitsHeader):\n got %s\nwant %s", path, got, want)
	}
	// the numbers swift-init is built with, as literals
	if MaxPeers != 32 || MaxQPs != 256 || MaxNameLen != 63 {
		t.Errorf("limits changed: peers %d, QPs %d, name %d: update the README's annotation table", MaxPeers, MaxQPs, MaxNameLen)
	}
}
