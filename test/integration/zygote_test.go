//go:build e2e

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// zygoteConfig is a node config with the fake RDMA tree, the repo's
// swift-init/swift-run and a private state dir.
func zygoteConfig(t *testing.T) string {
	t.Helper()
	_, nodeCfg := fakeNode(t, "memlock = \"4MiB\"\n")
	bin := os.Getenv("SWIFT_BIN")
	for _, f := range []string{"swift-init", "swift-run"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			t.Fatalf("%s not built in %s (run `make build`)", f, bin)
		}
	}
	state := t.TempDir()
	return runtimeConfig(t, fmt.Sprintf("state_dir = %q\n%s\n[zygote]\nbin_dir = %q\n", state, nodeCfg, bin))
}

var zygoteAnn = map[string]string{
	"swift.io/rdma": "true", "swift.io/zygote": "true", "swift.io/tenant": "t1",
	"swift.io/name": "a", "swift.io/peers": "b=127.0.0.1:18600", "swift.io/listen": "18599",
}

// TestZygoteIsInit: swift-init runs as PID 1 with the original entrypoint as
// its child, serves forks to swift-run (no RDMA on this host, so plain
// forks), and the container's exit status is the entrypoint's.
func TestZygoteIsInit(t *testing.T) {
	opts := zygoteConfig(t)
	script := `set -e
cat /proc/1/cmdline | tr '\0' ' '; echo
ls /.swift/tenant.keys 2>&1 | sed 's/^.*: /key path: /'
cat /proc/1/fd/0 </dev/null 2>&1 | sed 's/^.*: /init fd: /'
sed -n 's/^tenant /tenant=/p; s/^peer /peer=/p' /.swift/pool.conf
/.swift/bin/swift-run --no-qp -- exit 5 || echo "fork rc=$?"
/.swift/bin/swift-run --no-qp -- crash || echo "crash rc=$?"
/.swift/bin/swift-run --no-qp -- noop && echo "after crash ok"
/.swift/bin/swift-run -- noop || echo "qp rc=$?"
/.swift/bin/swift-run --no-qp -- /.swift/bin/handlers/hello.so one two || echo "so rc=$?"
/.swift/bin/swift-run --no-qp -- /.swift/bin/handlers/nosuch.so || echo "missing so rc=$?"
echo "socket=$SWIFT_SOCKET"
exit 3`
	so, se, code := ctrRun(t, runSpec{id: "zygote-init", runtime: swiftRuntime, optsFile: opts, annotations: zygoteAnn,
		args: []string{"sh", "-c", script}})
	if code != 3 {
		t.Errorf("container exit %d, want the entrypoint's 3 (stderr %q)", code, se)
	}
	for _, want := range []string{
		"/.swift/bin/swift-init --config /.swift/pool.conf -- sh -c",
		"key path: No such file or directory", "init fd: Permission denied", "tenant=t1", "peer=b 127.0.0.1:18600",
		"fork rc=5", "crash rc=139", "after crash ok",
		"qp rc=125", "socket=/run/swift/zygote.sock",
		`hello from /.swift/bin/handlers/hello.so: "one two" (0 QPs, provider none)`,
		"missing so rc=127",
	} {
		if !strings.Contains(so, want) {
			t.Errorf("output lacks %q:\n%s\nstderr: %s", want, so, se)
		}
	}
}

// TestZygoteForwardsSignals: SIGTERM to the task reaches the entrypoint
// (which traps it and exits 42), and the container ends with that status.
func TestZygoteForwardsSignals(t *testing.T) {
	opts := zygoteConfig(t)
	id := "zygote-signal"
	_, se, code := ctrRun(t, runSpec{id: id, runtime: swiftRuntime, optsFile: opts, annotations: zygoteAnn, detach: true,
		args: []string{"sh", "-c", "trap 'exit 42' TERM; while :; do sleep 0.1; done"}})
	if code != 0 {
		t.Fatalf("start: exit %d: %s", code, se)
	}
	defer assertNothingLeft(t, id)
	defer removeContainer(t, id)
	time.Sleep(500 * time.Millisecond)
	if _, se, err := daemon.Ctr(ctx(t), "task", "kill", "-s", "SIGTERM", id); err != nil {
		t.Fatalf("kill: %v: %s", err, se)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		so, _, _ := daemon.Ctr(ctx(t), "task", "ls")
		if strings.Contains(so, "STOPPED") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task did not stop after SIGTERM:\n%s", so)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// ctr task delete exits with the task's exit status
	t.Logf("stopped %v after SIGTERM", time.Since(deadline.Add(-20*time.Second)))
	_, se, _ = daemon.Ctr(ctx(t), "task", "delete", id)
	if !strings.Contains(se, "exit code 42") {
		t.Errorf("task delete says %q, want exit code 42 (the entrypoint's trap)", se)
	}
}

// TestZygoteNeedsBinaries: a node without swift-init refuses the
// container clearly and leaves nothing behind.
func TestZygoteNeedsBinaries(t *testing.T) {
	_, nodeCfg := fakeNode(t, "memlock = \"4MiB\"\n")
	opts := runtimeConfig(t, fmt.Sprintf("state_dir = %q\n%s\n[zygote]\nbin_dir = %q\n", t.TempDir(), nodeCfg, t.TempDir()))
	_, se, code := ctrRun(t, runSpec{id: "zygote-nobin", runtime: swiftRuntime, optsFile: opts, annotations: zygoteAnn, args: []string{"true"}})
	if code == 0 || !strings.Contains(se, "swift-init") || !strings.Contains(se, "zygote.bin_dir") {
		t.Errorf("exit %d, stderr %q; want a refusal naming swift-init and zygote.bin_dir", code, se)
	}
	assertNothingLeft(t, "zygote-nobin")
}

// TestZygoteMountsWin: with the zygote injected, a container's own mount
// at the zygote's paths (its pool description, key, socket directory) or
// an entrypoint that already is swift-init is refused at Create, naming
// it, and nothing is left behind.
func TestZygoteMountsWin(t *testing.T) {
	opts := zygoteConfig(t)
	mine := filepath.Join(t.TempDir(), "mine.conf")
	if err := os.WriteFile(mine, []byte("name evil\ntenant other\npool 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id    string
		flags []string
		args  []string
		want  []string
	}{
		{"mw-conf", []string{"--mount", "type=bind,src=" + mine + ",dst=/.swift/pool.conf,options=rbind:ro"}, []string{"true"},
			[]string{"the container mounts /.swift/pool.conf (from \"" + mine + "\")", "the shim's mounts win", "invalid argument"}},
		{"mw-file", []string{"--mount", "type=bind,src=" + mine + ",dst=/.swift/keys,options=rbind:ro"}, []string{"true"},
			[]string{"the container mounts /.swift/keys", "the shim's mounts win"}},
		{"mw-dir", []string{"--mount", "type=bind,src=" + filepath.Dir(mine) + ",dst=/.swift,options=rbind:ro"}, []string{"true"},
			[]string{"the container mounts /.swift (from", "the shim's mounts win"}},
		{"mw-socket", []string{"--mount", "type=tmpfs,src=tmpfs,dst=/run/swift,options=rw"}, []string{"true"},
			[]string{"the container mounts /run/swift", "the shim's mounts win"}},
		{"mw-init", nil, []string{"/.swift/bin/swift-init", "--config", "/tmp/mine.conf", "--", "true"},
			[]string{`entrypoint "/.swift/bin/swift-init" is swift-init already`}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			_, se, code := ctrRun(t, runSpec{id: tc.id, runtime: swiftRuntime, optsFile: opts, annotations: zygoteAnn, flags: tc.flags, args: tc.args})
			if code == 0 {
				t.Fatal("container ran; want Create refused")
			}
			for _, w := range tc.want {
				if !strings.Contains(se, w) {
					t.Errorf("error does not contain %q: %s", w, strings.TrimSpace(se))
				}
			}
			assertNothingLeft(t, tc.id)
		})
	}
}
