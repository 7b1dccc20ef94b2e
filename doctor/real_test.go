//go:build e2e

package doctor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// runVersion against the real binaries of this machine.
func TestRealVersions(t *testing.T) {
	dir := os.Getenv("SWIFT_CONTAINERD_BIN")
	if dir == "" {
		dir = "/var/cache/swift-build/containerd-2.4.2"
	}
	bin := filepath.Join(dir, "containerd")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("needs a real containerd (make deps, or SWIFT_CONTAINERD_BIN=DIR): %v", err)
	}
	n := fakeNode(t)
	n.Version, n.Containerd = runVersion, bin
	n.Runc = filepath.Join(t.TempDir(), "no-runc")
	expect(t, Run(context.Background(), n), map[string]want{
		"containerd": {OK, "containerd 2.4.2"},
		"runc":       {Fail, "no-runc"},
	})
}
