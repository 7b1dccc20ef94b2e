package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// Bad flags of the installer's subcommands are refused, naming what is
// wrong, before anything is touched.
func TestInstallArgs(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	for _, tc := range []struct {
		args []string
		err  error
		msg  string
	}{
		{[]string{"install", "--probe", "--ready-file", ready}, nil, "not installed yet"},
		{[]string{"install", "--daemonset", "swift-install"}, errdefs.ErrInvalidArgument, `--daemonset "swift-install": want NAMESPACE/NAME`},
		{[]string{"install", "--daemonset", "a/b/c"}, errdefs.ErrInvalidArgument, "want NAMESPACE/NAME"},
		{[]string{"install", "extra"}, errdefs.ErrInvalidArgument, `unexpected arguments ["extra"]`},
		{[]string{"install", "--log-level", "loud"}, errdefs.ErrInvalidArgument, `--log-level "loud"`},
		{[]string{"install", "--node-label", "", "--prefix", "opt", "--host-root", dir}, errdefs.ErrInvalidArgument, `prefix: node path "opt"`},
		{[]string{"install", "--node-label", "", "--prefix", "/opt/swift", "--state-dir", "/opt/swift/lib/swift/s", "--host-root", dir},
			errdefs.ErrInvalidArgument, "must not be inside"},
		{[]string{"install", "--node-label", "", "--restart-command", "no-such-restart", "--host-root", dir}, errdefs.ErrNotFound,
			`restart command: command "no-such-restart" is not in the node's PATH`},
		{[]string{"uninstall-hook"}, errdefs.ErrInvalidArgument, `--daemonset "": want NAMESPACE/NAME`},
		{[]string{"uninstall-hook", "--daemonset", "ns/ds", "x"}, errdefs.ErrInvalidArgument, "unexpected arguments"},
	} {
		err := run(tc.args)
		if err == nil || tc.err != nil && !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%q: %v, want %v mentioning %q", tc.args, err, tc.err, tc.msg)
		}
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"install", "--probe", "--ready-file", ready}); err != nil {
		t.Errorf("--probe once ready: %v", err)
	}
}
