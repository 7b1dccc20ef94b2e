package main

import (
	"bytes"
	"context"
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

// swiftctl runs swiftctl with args as main does, short of printing the
// error and exiting: it returns what the command printed and its error.
func swiftctl(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var so, se bytes.Buffer
	_, err = run(context.Background(), args, &so, &se)
	return so.String(), se.String(), err
}

// swiftctlExit runs swiftctl with args as main does and returns what it
// printed, its error report included, and its exit code.
func swiftctlExit(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var so, se bytes.Buffer
	code = execute(context.Background(), args, &so, &se)
	return so.String(), se.String(), code
}
