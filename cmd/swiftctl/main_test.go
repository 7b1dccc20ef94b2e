package main

import (
	"os"
	"testing"

	"github.com/swift-rdma/swift-containerd/ledger"
)

// TestMain lets this test binary check ledger copies, as the binaries
// that open the ledger do (ledger.RunCheckIfAsked).
func TestMain(m *testing.M) {
	ledger.RunCheckIfAsked()
	os.Exit(m.Run())
}
