package shim

import (
	"os"
	"testing"

	"github.com/swift-rdma/swift-containerd/ledger"
)

// TestMain lets this test binary check ledger copies, as the binaries
// that open the ledger do (ledger.RunCheckIfAsked), and stand in for
// swift-init's key intake (keyChild).
func TestMain(m *testing.M) {
	ledger.RunCheckIfAsked()
	if os.Getenv(keyChildEnv) != "" {
		keyChild()
	}
	os.Exit(m.Run())
}
