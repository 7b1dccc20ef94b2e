package annotations

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestZygoteLimitsHeader: zygote/swift-limits.h says what limits.go says.
func TestZygoteLimitsHeader(t *testing.T) {
	path := filepath.Join("..", "zygote", "swift-limits.h")
	want := zygoteLimitsHeader()
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
	if MaxPeers != 32 || MaxQPs != 256 || MaxNameLen != 63 || MaxZygoteNameLen != 127 {
		t.Errorf("limits changed: peers %d, QPs %d, name %d, zygote name %d: update the README's annotation table",
			MaxPeers, MaxQPs, MaxNameLen, MaxZygoteNameLen)
	}
}

// zygoteLimitsHeader is the text of zygote/swift-limits.h.
func zygoteLimitsHeader() string {
	return fmt.Sprintf(`/* Generated from annotations/limits.go: do not edit (SWIFT_WRITE_LIMITS=1
 * go test ./annotations -run TestZygoteLimitsHeader writes it again). The
 * shim refuses at Create what swift-init would refuse with these. */
#ifndef SWIFT_SWIFT_LIMITS_H
#define SWIFT_SWIFT_LIMITS_H

#define SWIFT_MAX_PEERS %d
#define SWIFT_MAX_QPS %d
#define SWIFT_NAME_MAX %d /* a name of at most %d bytes and its NUL */

#endif
`, MaxPeers, MaxQPs, MaxZygoteNameLen+1, MaxZygoteNameLen)
}
