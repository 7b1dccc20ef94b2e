package hooks

import (
	"os"
	"testing"

	"github.com/swift-rdma/swift-containerd/ledger"
)

// TestMain lets this test binary check ledger copies (ledger.RunCheckIfAsked).
func TestMain(m *testing.M) {
	ledger.RunCheckIfAsked()
	os.Exit(m.Run())
}
