package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/spf13/cobra"
)

// commandPaths lists every command of swiftctl's tree (hidden ones
// aside), cobra's help and completion commands included, as arguments.
func commandPaths(t *testing.T) [][]string {
	t.Helper()
	root, _ := newRootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, s := range c.Commands() {
			if !s.Hidden {
				walk(s, append(append([]string{}, path...), s.Name()))
			}
		}
	}
	walk(root, nil)
	return paths
}

// TestHelpEveryCommand: --help and -h on every command print its help to
// stdout, naming the command, and exit 0.
func TestHelpEveryCommand(t *testing.T) {
	paths := commandPaths(t)
	if len(paths) < 25 {
		t.Fatalf("only %d commands in the tree: %q", len(paths), paths)
	}
	for _, path := range paths {
		name := strings.Join(append([]string{"swiftctl"}, path...), " ")
		for _, flag := range []string{"--help", "-h"} {
			so, se, code := swiftctlExit(t, append(append([]string{}, path...), flag)...)
			if code != 0 || se != "" {
				t.Errorf("%s %s: exit %d, stderr %q", name, flag, code, se)
			}
			if !strings.Contains(so, name) || !strings.Contains(so, "Usage:") {
				t.Errorf("%s %s: help does not name the command:\n%s", name, flag, so)
			}
		}
	}
	// help COMMAND too
	so, _, code := swiftctlExit(t, "help", "pools", "repair")
	if code != 0 || !strings.Contains(so, "swiftctl pools repair [flags]") {
		t.Errorf("help pools repair: exit %d\n%s", code, so)
	}
}

// TestOwnFlags: a command's help lists its own flags, not another
// command's (no global flags but -h).
func TestOwnFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		has, lacks []string
	}{
		{[]string{"keys", "show"}, []string{"--output"}, []string{"--force", "--keep", "--id", "--config"}},
		{[]string{"keys", "gen"}, []string{"--id", "--force"}, []string{"--keep"}},
		{[]string{"keys", "rotate"}, []string{"--id", "--keep"}, []string{"--force"}},
		{[]string{"pools", "gc"}, []string{"--dry-run", "--config"}, []string{"--leases", "--address"}},
		{[]string{"pools", "repair"}, []string{"--address", "--state", "--dry-run", "--output"}, []string{"--leases"}},
		{[]string{"uninstall", "containerd"}, []string{"--config", "--runtime-name", "--dry-run", "--output"}, []string{"--version", "--runc", "--swift-config", "--shim"}},
		{[]string{"install", "containerd"}, []string{"--version", "--runc", "--systemd-cgroup", "--shim", "--output"}, []string{"--json"}},
		{[]string{"version"}, []string{"--output"}, []string{"--config"}},
		{[]string{"cache", "check"}, []string{"--config", "--output"}, []string{"--runs", "--json"}},
	} {
		so, _, code := swiftctlExit(t, append(tc.args, "--help")...)
		if code != 0 {
			t.Fatalf("%q --help: exit %d", tc.args, code)
		}
		for _, f := range tc.has {
			if !strings.Contains(so, f) {
				t.Errorf("%q --help lacks %s:\n%s", tc.args, f, so)
			}
		}
		for _, f := range tc.lacks {
			if strings.Contains(so, f+" ") {
				t.Errorf("%q --help lists %s:\n%s", tc.args, f, so)
			}
		}
		if strings.Contains(so, "Global Flags") {
			t.Errorf("%q --help lists global flags:\n%s", tc.args, so)
		}
	}
}

// TestUsageErrors: a command line swiftctl cannot run exits 2 and says
// where the usage is; stdout stays empty.
func TestUsageErrors(t *testing.T) {
	ring := filepath.Join(t.TempDir(), "r.keys")
	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{nil, "swiftctl: missing command\nRun 'swiftctl --help' for usage.\n"},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "swiftctl"`},
		{[]string{"pool"}, "Did you mean this?\n\tpools"},
		{[]string{"cache"}, "swiftctl: cache needs a command: build, check, show\nRun 'swiftctl cache --help' for usage.\n"},
		{[]string{"cache", "chek"}, `unknown command "chek" for "swiftctl cache" (commands: build, check, show); did you mean check?`},
		{[]string{"install", "docker"}, `unknown command "docker" for "swiftctl install"`},
		{[]string{"help", "pools", "fix"}, `unknown help topic "pools fix"`},
		{[]string{"devices", "--bogus"}, "swiftctl: unknown flag: --bogus\nRun 'swiftctl devices --help' for usage.\n"},
		{[]string{"keys", "show", "--force", ring}, "unknown flag: --force"}, // gen's flag
		{[]string{"pools", "ls", "-x"}, "unknown shorthand flag: 'x' in -x"},
		{[]string{"keys", "show"}, "swiftctl: keys show takes FILE, got no arguments\n"},
		{[]string{"keys", "show", "a", "b"}, `keys show takes FILE, got 2 argument(s): "a" "b"`},
		{[]string{"config", "check", "a", "b"}, `config check takes [FILE], got 2 argument(s)`},
		{[]string{"doctor", "extra"}, `doctor takes no arguments, got "extra"`},
		{[]string{"cache", "build", "--runs", "many"}, `invalid argument "many" for "--runs" flag`},
		{[]string{"keys", "rotate", "--keep=x", ring}, `invalid argument "x" for "--keep" flag`},
		{[]string{"version", "-o", "yaml"}, `"yaml" is not an output format: want text or json`},
		{[]string{"pools", "ls", "--json=maybe"}, `invalid argument "maybe" for "--json" flag`},
	} {
		so, se, code := swiftctlExit(t, tc.args...)
		if code != exitUsage || !strings.Contains(se, tc.want) || so != "" {
			t.Errorf("swiftctl %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, so, se, tc.want)
		}
		if !strings.Contains(se, "--help' for usage.") {
			t.Errorf("swiftctl %q: stderr does not say where the usage is: %q", tc.args, se)
		}
		// and the error is an InvalidArgument one for callers in Go
		if _, _, err := swiftctl(t, tc.args...); !errdefs.IsInvalidArgument(err) {
			t.Errorf("swiftctl %q: %v is not InvalidArgument", tc.args, err)
		}
	}
	// with -o json the usage error is JSON on stdout
	so, se, code := swiftctlExit(t, "version", "extra", "-o", "json")
	var je map[string]any
	if code != exitUsage || se != "" || json.Unmarshal([]byte(so), &je) != nil ||
		je["error"] != `version takes no arguments, got "extra"` || je["class"] != "invalid argument" || je["exit_code"] != 2.0 {
		t.Errorf("version extra -o json: exit %d, stdout %q, stderr %q", code, so, se)
	}
}

// TestFlagsAfterArguments: flags are read before and after positional
// arguments alike.
func TestFlagsAfterArguments(t *testing.T) {
	ring := filepath.Join(t.TempDir(), "r.keys")
	if _, se, code := swiftctlExit(t, "keys", "gen", ring, "--id", "k1"); code != 0 {
		t.Fatalf("keys gen FILE --id: exit %d: %s", code, se)
	}
	so, se, code := swiftctlExit(t, "keys", "rotate", ring, "--id", "k2", "--keep", "1", "-o", "json")
	var r struct{ Keys []struct{ ID string } }
	if code != 0 || json.Unmarshal([]byte(so), &r) != nil || len(r.Keys) != 1 || r.Keys[0].ID != "k2" {
		t.Fatalf("keys rotate FILE --id k2 --keep 1 -o json: exit %d, %q, %q", code, so, se)
	}
	pol := filepath.Join("..", "..", "examples", "policy.toml")
	so, se, code = swiftctlExit(t, "policy", "check", pol, "--config", filepath.Join(t.TempDir(), "absent.toml"))
	if code != 0 || !strings.Contains(so, pol+": ok, 2 tenant(s)") {
		t.Errorf("policy check FILE --config: exit %d, %q, %q", code, so, se)
	}
}

// TestExitCodes: each errdefs class maps to its documented exit code.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err   error
		code  int
		class string
	}{
		{errors.New("plain"), 1, ""},
		{&checkFailed{errors.New("2 check(s) failed")}, 1, ""},
		{usagef("unknown flag: --x"), 2, "invalid argument"},
		{fmt.Errorf("bad key: %w", errdefs.ErrInvalidArgument), 3, "invalid argument"},
		{fmt.Errorf("policy missing: %w", errdefs.ErrFailedPrecondition), 4, "failed precondition"},
		{fmt.Errorf("no cache: %w", errdefs.ErrNotFound), 5, "not found"},
		{fmt.Errorf("open: %w", fs.ErrNotExist), 5, "not found"},
		{fmt.Errorf("ledger: %w", errdefs.ErrDataLoss), 6, "data loss"},
		{fmt.Errorf("wrapped: %w", fmt.Errorf("ledger: %w", errdefs.ErrDataLoss)), 6, "data loss"},
		{fmt.Errorf("containerd: %w", errdefs.ErrUnavailable), 7, "unavailable"},
		{fmt.Errorf("ring: %w", errdefs.ErrPermissionDenied), 8, "permission denied"},
		{fmt.Errorf("open: %w", fs.ErrPermission), 8, "permission denied"},
		{fmt.Errorf("x: %w", errdefs.ErrAlreadyExists), 1, "already exists"},
	} {
		code, class := classify(tc.err)
		if code != tc.code || class != tc.class {
			t.Errorf("classify(%v) = %d, %q; want %d, %q", tc.err, code, class, tc.code, tc.class)
		}
	}
}

// TestMessage: errors print as sentences, without the class words that
// wrapping an errdefs sentinel appends; other words are kept.
func TestMessage(t *testing.T) {
	inner := fmt.Errorf("tenant policy /p does not exist: %w", errdefs.ErrFailedPrecondition)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{inner, "tenant policy /p does not exist"},
		{fmt.Errorf("policy check: %w", inner), "policy check: tenant policy /p does not exist"},
		{fmt.Errorf("%w: no usable ledger", errdefs.ErrDataLoss), "no usable ledger"},
		{fmt.Errorf("a: %w; b: %w", fmt.Errorf("x: %w", errdefs.ErrNotFound), fmt.Errorf("y: %w", errdefs.ErrInvalidArgument)), "a: x; b: y"},
		// a class embedded as text: dropped where no system error has the words
		{fmt.Errorf("ledger: %v", fmt.Errorf("page 3: %w", errdefs.ErrDataLoss)), "ledger: page 3"},
		// the words of a system error stay
		{fmt.Errorf("open /x: permission denied"), "open /x: permission denied"},
		{fmt.Errorf("write: %w: %w", errors.New("open /x: invalid argument"), errdefs.ErrInvalidArgument), "write: open /x: invalid argument"},
		{errdefs.ErrNotFound, "not found"},
	} {
		if got := message(tc.err); got != tc.want {
			t.Errorf("message(%q) = %q, want %q", tc.err.Error(), got, tc.want)
		}
	}
}

// TestFailedPreconditionPrinted: a missing configured tenant policy is a
// failed precondition: exit 4, printed without the class words; with -o
// json the error and its class go to stdout.
func TestFailedPreconditionPrinted(t *testing.T) {
	cfg, missing := missingPolicyNode(t)
	so, se, code := swiftctlExit(t, "policy", "check", "--config", cfg)
	if code != 4 || so != "" || !strings.HasPrefix(se, "swiftctl: tenant policy "+missing+" (policy_path or $SWIFT_POLICY) does not exist") ||
		strings.Contains(se, "failed precondition") || strings.Count(se, "\n") != 1 {
		t.Errorf("policy check (configured, missing): exit %d, stdout %q, stderr %q", code, so, se)
	}
	so, se, code = swiftctlExit(t, "policy", "check", "--config", cfg, "-o", "json")
	var got struct {
		Error    string
		Class    *string
		ExitCode int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(so), &got); err != nil || code != 4 || se != "" {
		t.Fatalf("-o json: exit %d, %v, stdout %q, stderr %q", code, err, so, se)
	}
	if got.Class == nil || *got.Class != "failed precondition" || got.ExitCode != 4 ||
		!strings.HasPrefix(got.Error, "tenant policy "+missing+" (policy_path or $SWIFT_POLICY) does not exist") ||
		strings.Contains(got.Error, "failed precondition") {
		t.Errorf("-o json: %s", so)
	}
}

// TestFailures: real failures exit 1 or their class's code, never 2.
func TestFailures(t *testing.T) {
	dir := t.TempDir()
	ring := filepath.Join(dir, "r.keys")
	if _, se, code := swiftctlExit(t, "keys", "gen", ring); code != 0 {
		t.Fatalf("keys gen: exit %d: %s", code, se)
	}
	so, se, code := swiftctlExit(t, "keys", "gen", ring)
	if code != 1 || so != "" || se != "swiftctl: keys gen: "+ring+" exists (rotate it, or --force to replace it)\n" {
		t.Errorf("keys gen over a ring: exit %d, %q, %q", code, so, se)
	}
	so, se, code = swiftctlExit(t, "keys", "show", filepath.Join(dir, "none"))
	if code != 5 || so != "" || !strings.Contains(se, "no such file or directory") {
		t.Errorf("keys show of a missing ring: exit %d, %q, %q", code, so, se)
	}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[tenants.a]\nseccomp = \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	so, se, code = swiftctlExit(t, "policy", "check", bad)
	if code != 3 || so != "" || !strings.Contains(se, bad+":2: tenants.a.seccomp:") ||
		!strings.HasSuffix(se, "swiftctl: tenant policy "+bad+": 1 problem(s)\n") {
		t.Errorf("policy check of a bad policy: exit %d, %q, %q", code, so, se)
	}
	// -o json: the problems in the error object, nothing on stderr
	so, se, code = swiftctlExit(t, "policy", "check", bad, "-o", "json")
	var je struct {
		Error    string
		Class    string
		Problems []struct {
			File    string
			Line    *int
			Key     string
			Message string
		}
	}
	if code != 3 || se != "" || json.Unmarshal([]byte(so), &je) != nil || je.Class != "invalid argument" || len(je.Problems) != 1 ||
		je.Problems[0].Line == nil || *je.Problems[0].Line != 2 || je.Problems[0].Key != "tenants.a.seccomp" || je.Problems[0].File != bad {
		t.Errorf("policy check -o json of a bad policy: exit %d, %q, %q", code, so, se)
	}
}

// TestPoolsRepairWithoutContainerd: repair fails at once, naming the
// socket, when containerd's socket is missing, not a socket, or dead.
func TestPoolsRepairWithoutContainerd(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "absent.toml") // not read: the socket is checked first
	sock := filepath.Join(dir, "none.sock")
	start := time.Now()
	so, se, code := swiftctlExit(t, "pools", "repair", "--address", sock, "--config", cfg)
	if code != exitUnavailable || so != "" ||
		se != "swiftctl: containerd's socket "+sock+" does not exist (is containerd running? --address names its socket)\n" {
		t.Errorf("repair without a socket: exit %d, %q, %q", code, so, se)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("repair without a socket took %v", d)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, se, code := swiftctlExit(t, "pools", "repair", "--address", file); code != exitInvalid || !strings.Contains(se, file+" is not a socket") {
		t.Errorf("repair on a regular file: exit %d, %q", code, se)
	}
	// a socket nobody listens on any more
	dead := filepath.Join(dir, "dead.sock")
	l, err := net.Listen("unix", dead)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	so, se, code = swiftctlExit(t, "pools", "repair", "--address", "unix://"+dead, "-o", "json")
	if code != exitUnavailable || se != "" || !strings.Contains(so, `"error": "containerd's socket `+dead+` does not answer (is containerd running?)`) ||
		!strings.Contains(so, `"class": "unavailable"`) {
		t.Errorf("repair on a dead socket: exit %d, %q, %q", code, so, se)
	}
}
