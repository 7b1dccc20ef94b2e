package ledger

import (
	"os"
	"testing"
)

// TestMain lets this test binary check ledger copies, as the shim and
// swiftctl do (RunCheckIfAsked).
func TestMain(m *testing.M) {
	RunCheckIfAsked()
	os.Exit(m.Run())
}
