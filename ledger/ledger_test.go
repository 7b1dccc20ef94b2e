package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

func lease(ns, id, tenant string, c Amounts) Lease {
	return Lease{Namespace: ns, ID: id, Tenant: tenant, Devices: []string{"rxe0"}, Charge: c, Owner: Self(),
		Created: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func one(qps uint64) Amounts { return Amounts{Containers: 1, QPs: qps} }

func keys(ls []Lease) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Key())
	}
	return out
}

func TestAcquireQuota(t *testing.T) {
	type step struct {
		lease Lease
		quota Amounts
		err   []string // substrings of a QuotaError; nil: admitted
	}
	tests := []struct {
		name  string
		steps []step
		want  []string // keys in the ledger afterwards
	}{
		{"no quota admits all", []step{
			{lease("n", "a", "t", one(100)), Amounts{}, nil},
			{lease("n", "b", "t", one(100)), Amounts{}, nil},
		}, []string{"n/a", "n/b"}},
		{"containers quota", []step{
			{lease("n", "a", "t", one(1)), Amounts{Containers: 2}, nil},
			{lease("n", "b", "t", one(1)), Amounts{Containers: 2}, nil},
			{lease("n", "c", "t", one(1)), Amounts{Containers: 2}, []string{`tenant "t"`, "containers quota", "limit 2, in use 2, this container asks 1"}},
		}, []string{"n/a", "n/b"}},
		{"qps quota exactly met", []step{
			{lease("n", "a", "t", one(6)), Amounts{QPs: 10}, nil},
			{lease("n", "b", "t", one(4)), Amounts{QPs: 10}, nil},
			{lease("n", "c", "t", one(1)), Amounts{QPs: 10}, []string{"qps quota", "limit 10, in use 10, this container asks 1"}},
		}, []string{"n/a", "n/b"}},
		{"a charge alone above the quota", []step{
			{lease("n", "a", "t", one(11)), Amounts{QPs: 10}, []string{"limit 10, in use 0, this container asks 11"}},
		}, nil},
		{"other tenants do not count", []step{
			{lease("n", "a", "t1", one(10)), Amounts{QPs: 10}, nil},
			{lease("n", "b", "t2", one(10)), Amounts{QPs: 10}, nil},
		}, []string{"n/a", "n/b"}},
		{"same key replaces, not adds", []step{
			{lease("n", "a", "t", one(10)), Amounts{QPs: 10}, nil},
			{lease("n", "a", "t", one(8)), Amounts{QPs: 10}, nil},
		}, []string{"n/a"}},
		{"namespaces are distinct", []step{
			{lease("n1", "a", "t", one(5)), Amounts{QPs: 10}, nil},
			{lease("n2", "a", "t", one(5)), Amounts{QPs: 10}, nil},
			{lease("n3", "a", "t", one(5)), Amounts{QPs: 10}, []string{"in use 10"}},
		}, []string{"n1/a", "n2/a"}},
		{"memlock in bytes", []step{
			{lease("n", "a", "t", Amounts{Memlock: 3 << 30}), Amounts{Memlock: 4 << 30}, nil},
			{lease("n", "b", "t", Amounts{Memlock: 2 << 30}), Amounts{Memlock: 4 << 30}, []string{"memlock quota", "limit 4GiB, in use 3GiB, this container asks 2GiB"}},
		}, []string{"n/a"}},
		{"hca objects", []step{
			{lease("n", "a", "t", Amounts{HCAObject: 100, HCAHandle: 2}), Amounts{HCAObject: 150, HCAHandle: 10}, nil},
			{lease("n", "b", "t", Amounts{HCAObject: 100, HCAHandle: 2}), Amounts{HCAObject: 150, HCAHandle: 10}, []string{"hca_object quota"}},
		}, []string{"n/a"}},
		{"unlimited memlock charges do not overflow", []step{
			{lease("n", "a", "t", Amounts{Memlock: math.MaxUint64}), Amounts{}, nil},
			{lease("n", "b", "t", Amounts{Memlock: math.MaxUint64}), Amounts{}, nil},
			{lease("n", "c", "t", Amounts{Memlock: 1}), Amounts{Memlock: 1 << 40}, []string{"in use unlimited"}},
		}, []string{"n/a", "n/b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := New(t.TempDir())
			for i, s := range tc.steps {
				_, _, err := l.Acquire(s.lease, Quota{Limit: s.quota, Source: "tenants.t.node in p.toml"})
				if s.err == nil {
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					continue
				}
				var qe *QuotaError
				if !errors.As(err, &qe) || !errdefs.IsResourceExhausted(err) {
					t.Fatalf("step %d: error %v, want a ResourceExhausted QuotaError", i, err)
				}
				for _, m := range append(s.err, "tenants.t.node in p.toml") {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("step %d: error %q does not contain %q", i, err, m)
					}
				}
			}
			got, err := l.List()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(keys(got), tc.want) {
				t.Errorf("ledger holds %q, want %q", keys(got), tc.want)
			}
		})
	}
}

func TestAcquireRecordsLease(t *testing.T) {
	l := New(t.TempDir())
	in := lease("k8s.io", "c1", "team-a", Amounts{Containers: 1, QPs: 4, HCAHandle: 2, HCAObject: 64, Memlock: 1 << 30})
	in.Bundle = t.TempDir()
	if _, _, err := l.Acquire(in, Quota{}); err != nil {
		t.Fatal(err)
	}
	got, err := l.List()
	if err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], in) {
		t.Fatalf("List = %+v, %v; want [%+v]", got, err, in)
	}
	if fi, err := os.Stat(l.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("ledger file: %v, %v; want mode 0600", fi, err)
	}
	if u := Usage(got)["team-a"]; u != in.Charge {
		t.Errorf("Usage = %+v", u)
	}
}

func TestAcquireInvalid(t *testing.T) {
	l := New(t.TempDir())
	for _, x := range []Lease{{ID: "a", Tenant: "t"}, {Namespace: "n", Tenant: "t"}, {Namespace: "n", ID: "a"}} {
		if _, _, err := l.Acquire(x, Quota{}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("Acquire(%+v) = %v, want InvalidArgument", x, err)
		}
	}
	if _, err := os.Stat(l.Path); err == nil {
		t.Error("a refused lease created the ledger")
	}
}

func TestRelease(t *testing.T) {
	l := New(t.TempDir())
	// Nothing to release in a ledger that does not exist: no file is created.
	if x, err := l.Release("n", "a", nil); x != nil || err != nil {
		t.Fatalf("Release(empty) = %v, %v", x, err)
	}
	if _, err := os.Stat(l.Path); err == nil {
		t.Fatal("Release created the ledger")
	}
	a := lease("n", "a", "t", one(1))
	if _, _, err := l.Acquire(a, Quota{}); err != nil {
		t.Fatal(err)
	}
	other := Owner{PID: a.Owner.PID, Start: a.Owner.Start + 1}
	if x, err := l.Release("n", "a", &other); x != nil || err != nil {
		t.Fatalf("Release by another owner = %v, %v; want it left alone", x, err)
	}
	self := Self()
	if x, err := l.Release("n", "a", &self); err != nil || x == nil || x.Key() != "n/a" {
		t.Fatalf("Release = %v, %v", x, err)
	}
	if x, err := l.Release("n", "a", nil); x != nil || err != nil {
		t.Fatalf("second Release = %v, %v; want nothing", x, err)
	}
	if got, _ := l.List(); len(got) != 0 {
		t.Fatalf("ledger not empty: %+v", got)
	}
}

func TestAlive(t *testing.T) {
	bundle := t.TempDir()
	self := Self()
	// A process that has exited: its PID is no longer ours to check.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	exited := Owner{PID: cmd.Process.Pid, Start: 1}
	tests := []struct {
		name string
		l    Lease
		want bool
	}{
		{"bundle and shim", Lease{Bundle: bundle, Owner: self}, true},
		{"bundle gone", Lease{Bundle: filepath.Join(bundle, "gone"), Owner: self}, false},
		// gc from another mount namespace: neither the bundle nor its task
		// directory is seen; the shim runs
		{"bundle not seen, shim runs", Lease{Bundle: "/nonexistent/io.containerd.runtime.v2.task/ns/id", Owner: self}, true},
		{"bundle not seen, shim gone", Lease{Bundle: "/nonexistent/io.containerd.runtime.v2.task/ns/id", Owner: exited}, false},
		{"shim gone", Lease{Bundle: bundle, Owner: exited}, false},
		{"pid recycled", Lease{Bundle: bundle, Owner: Owner{PID: self.PID, Start: self.Start + 1}}, false},
		{"no pid recorded", Lease{Bundle: bundle}, true},
		{"nothing recorded", Lease{}, true},
	}
	for _, tc := range tests {
		if got := Alive(tc.l); got != tc.want {
			t.Errorf("%s: Alive = %v, want %v", tc.name, got, tc.want)
		}
	}
	if self.Start == 0 {
		t.Error("Self() has no start time")
	}
}

func TestGCAndReclaimOnAcquire(t *testing.T) {
	dir := t.TempDir()
	l := New(dir)
	live, gone := t.TempDir(), filepath.Join(t.TempDir(), "gone")
	mk := func(id, bundle string) Lease {
		x := lease("n", id, "t", one(1))
		x.Bundle = bundle
		return x
	}
	for _, x := range []Lease{mk("live", live), mk("dead1", gone), mk("dead2", gone)} {
		// Record without reclaiming: a test liveness that sees all alive.
		r := &Ledger{Path: l.Path, Alive: func(Lease) bool { return true }}
		if _, _, err := r.Acquire(x, Quota{}); err != nil {
			t.Fatal(err)
		}
	}
	dead, err := l.GC(true)
	if err != nil || !reflect.DeepEqual(keys(dead), []string{"n/dead1", "n/dead2"}) {
		t.Fatalf("GC(dry run) = %q, %v", keys(dead), err)
	}
	if all, _ := l.List(); len(all) != 3 {
		t.Fatalf("dry run removed leases: %q", keys(all))
	}
	// A quota of 2 containers: live + 2 dead = 3 held; Acquire reclaims
	// the dead ones and admits the new lease.
	_, rec, err := l.Acquire(mk("new", live), Quota{Limit: Amounts{Containers: 2}})
	if err != nil || !reflect.DeepEqual(keys(rec), []string{"n/dead1", "n/dead2"}) {
		t.Fatalf("Acquire = reclaimed %q, %v", keys(rec), err)
	}
	if all, _ := l.List(); !reflect.DeepEqual(keys(all), []string{"n/live", "n/new"}) {
		t.Fatalf("ledger holds %q", keys(all))
	}
	// Reclaiming persists even when the quota refuses the new lease.
	r := &Ledger{Path: l.Path, Alive: func(Lease) bool { return true }}
	if _, _, err := r.Acquire(mk("dead3", gone), Quota{}); err != nil {
		t.Fatal(err)
	}
	_, rec, err = l.Acquire(mk("over", live), Quota{Limit: Amounts{Containers: 2}})
	if !errdefs.IsResourceExhausted(err) || !reflect.DeepEqual(keys(rec), []string{"n/dead3"}) {
		t.Fatalf("Acquire over quota = reclaimed %q, %v", keys(rec), err)
	}
	if all, _ := l.List(); !reflect.DeepEqual(keys(all), []string{"n/live", "n/new"}) {
		t.Fatalf("ledger holds %q", keys(all))
	}
	dead, err = l.GC(false)
	if err != nil || len(dead) != 0 {
		t.Fatalf("GC = %q, %v; want nothing left to reclaim", keys(dead), err)
	}
	if err := os.RemoveAll(live); err != nil {
		t.Fatal(err)
	}
	if dead, err = l.GC(false); err != nil || len(dead) != 2 {
		t.Fatalf("GC after the bundle went = %q, %v", keys(dead), err)
	}
	if all, _ := l.List(); len(all) != 0 {
		t.Fatalf("ledger holds %q", keys(all))
	}
}

func TestMissingLedger(t *testing.T) {
	l := New(filepath.Join(t.TempDir(), "state"))
	if ls, err := l.List(); ls != nil || err != nil {
		t.Errorf("List = %v, %v", ls, err)
	}
	if d, err := l.GC(false); d != nil || err != nil {
		t.Errorf("GC = %v, %v", d, err)
	}
	if _, err := os.Stat(filepath.Dir(l.Path)); err == nil {
		t.Error("reading a missing ledger created the state dir")
	}
}

func TestLockTimeout(t *testing.T) {
	l := New(t.TempDir())
	l.Timeout = 200 * time.Millisecond
	f, _, err := l.lock(true)
	if err != nil {
		t.Fatal(err)
	}
	// A second open file description conflicts, as another process would.
	start := time.Now()
	_, _, err = l.Acquire(lease("n", "a", "t", one(1)), Quota{})
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "still locked") {
		t.Fatalf("Acquire while locked = %v, want Unavailable", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %v, want about 200ms", d)
	}
	f.Close()
	if _, _, err := l.Acquire(lease("n", "a", "t", one(1)), Quota{}); err != nil {
		t.Fatalf("Acquire after unlock: %v", err)
	}
}

func TestUnwritableStateDir(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l := New(filepath.Join(f, "state")) // a path under a regular file
	if _, _, err := l.Acquire(lease("n", "a", "t", one(1)), Quota{}); !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("Acquire = %v, want FailedPrecondition", err)
	}
}

// TestConcurrentGoroutines: 64 acquirers, each with its own file
// descriptors, against a quota of 10: exactly 10 win.
func TestConcurrentGoroutines(t *testing.T) {
	path := New(t.TempDir()).Path
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, refused := 0, 0
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := &Ledger{Path: path, Timeout: 30 * time.Second}
			_, _, err := l.Acquire(lease("n", fmt.Sprint(i), "t", one(1)), Quota{Limit: Amounts{QPs: 10}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errdefs.IsResourceExhausted(err):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	all, err := (&Ledger{Path: path}).List()
	if err != nil {
		t.Fatal(err)
	}
	if won != 10 || refused != 54 || len(all) != 10 {
		t.Fatalf("won %d, refused %d, ledger holds %d; want 10, 54, 10", won, refused, len(all))
	}
}

// TestConcurrentProcesses: 8 processes × 8 acquisitions against a quota
// of 20 QPs at 1 each: exactly 20 leases, whatever the interleaving.
func TestConcurrentProcesses(t *testing.T) {
	path := New(t.TempDir()).Path
	var cmds []*exec.Cmd
	for p := 0; p < 8; p++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAcquire$")
		cmd.Env = append(os.Environ(), "LEDGER_HELPER="+path, "LEDGER_HELPER_PROC="+strconv.Itoa(p))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
	}
	all, err := (&Ledger{Path: path}).List()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 20 {
		t.Fatalf("ledger holds %d leases, want exactly the quota of 20", len(all))
	}
	if u := Usage(all)["t"]; u.QPs != 20 {
		t.Fatalf("usage %+v", u)
	}
}

// TestHelperAcquire is run by TestConcurrentProcesses in child processes.
func TestHelperAcquire(t *testing.T) {
	path := os.Getenv("LEDGER_HELPER")
	if path == "" {
		return // not a helper run: nothing to do
	}
	l := &Ledger{Path: path, Timeout: 30 * time.Second, Alive: func(Lease) bool { return true }}
	for i := 0; i < 8; i++ {
		id := os.Getenv("LEDGER_HELPER_PROC") + "-" + strconv.Itoa(i)
		if _, _, err := l.Acquire(lease("n", id, "t", one(1)), Quota{Limit: Amounts{QPs: 20}}); err != nil && !errdefs.IsResourceExhausted(err) {
			t.Fatal(err)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		res  string
		n    uint64
		want string
	}{{"qps", 12, "12"}, {"memlock", 4 << 20, "4MiB"}, {"memlock", math.MaxUint64, "unlimited"}, {"memlock", 1000, "1000"}, {"memlock", 0, "0"}} {
		if got := Format(tc.res, tc.n); got != tc.want {
			t.Errorf("Format(%s, %d) = %q, want %q", tc.res, tc.n, got, tc.want)
		}
	}
}

// TestAliveWhenProcCannotJudge: a lease is reclaimed only when /proc says
// its shim is gone; a /proc that cannot be read, that hides processes, or
// that belongs to another PID namespace keeps it alive.
func TestAliveWhenProcCannotJudge(t *testing.T) {
	stat := func(start uint64, state string) string {
		// fields 3.. after "(comm)": state, then 18 more up to starttime (field 22)
		return fmt.Sprintf("42 (swift shim) %s 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n", state, start)
	}
	proc := func(t *testing.T, files map[string]string, dirs ...string) string {
		root := t.TempDir()
		for p, body := range files {
			os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
			if err := os.WriteFile(filepath.Join(root, p), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range dirs {
			os.MkdirAll(filepath.Join(root, d), 0o755)
		}
		return root
	}
	owner := Owner{PID: 42, Start: 777, PIDNS: 9}
	lease := Lease{Owner: owner}
	tests := []struct {
		name   string
		proc   string
		selfNS uint64
		want   bool
	}{
		{"shim runs", proc(t, map[string]string{"1/stat": stat(1, "S"), "42/stat": stat(777, "S")}), 9, true},
		{"shim gone", proc(t, map[string]string{"1/stat": stat(1, "S")}), 9, false},
		{"pid recycled", proc(t, map[string]string{"1/stat": stat(1, "S"), "42/stat": stat(778, "S")}), 9, false},
		{"shim a zombie", proc(t, map[string]string{"1/stat": stat(1, "S"), "42/stat": stat(777, "Z")}), 9, false},
		{"shim's stat unreadable (EMFILE, EACCES: here EISDIR)", proc(t, map[string]string{"1/stat": stat(1, "S")}, "42/stat"), 9, true},
		{"hidepid: PID 1 not shown", proc(t, nil), 9, true},
		{"no /proc at all", filepath.Join(t.TempDir(), "none"), 9, true},
		{"another PID namespace", proc(t, map[string]string{"1/stat": stat(1, "S")}), 10, true},
	}
	for _, tc := range tests {
		if got := aliveIn(tc.proc, tc.selfNS, lease); got != tc.want {
			t.Errorf("%s: alive = %v, want %v", tc.name, got, tc.want)
		}
	}
	// A lease recorded before the namespace was: judged by PID as before.
	old := Lease{Owner: Owner{PID: 42, Start: 777}}
	if aliveIn(proc(t, map[string]string{"1/stat": stat(1, "S")}), 10, old) {
		t.Error("a lease without a recorded PID namespace whose shim is gone stays alive")
	}
	if Self().PIDNS == 0 {
		t.Error("Self() records no PID namespace")
	}
}

// TestSalvageAndRebuild: a sound ledger salvages whole; one with its leaf
// page destroyed salvages nothing and says so; Rebuild writes exactly the
// leases given and keeps the old file aside.
func TestSalvageAndRebuild(t *testing.T) {
	dir := t.TempDir()
	l := New(dir)
	l.Alive = func(Lease) bool { return true }
	for _, id := range []string{"a", "b"} {
		if _, _, err := l.Acquire(lease("n", id, "t", one(1)), Quota{}); err != nil {
			t.Fatal(err)
		}
	}
	got, problems := l.Salvage()
	if len(got) != 2 || len(problems) != 0 {
		t.Fatalf("Salvage(sound) = %d leases, problems %v", len(got), problems)
	}
	data, err := os.ReadFile(l.Path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 2 * 4096; i < len(data); i++ {
		data[i] = 0xa5
	}
	if err := os.WriteFile(l.Path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := l.List(); !errdefs.IsDataLoss(err) || !strings.Contains(err.Error(), "is corrupt") {
		t.Fatalf("List(corrupt) = %v, want DataLoss", err)
	}
	got, problems = l.Salvage()
	if len(got) != 0 || len(problems) == 0 || !strings.Contains(problems[len(problems)-1], "is corrupt: reading it stopped") {
		t.Fatalf("Salvage(corrupt) = %+v, %v", got, problems)
	}
	aside := l.Path + ".old"
	if err := l.Rebuild([]Lease{lease("n", "b", "t", one(1))}, aside); err != nil {
		t.Fatal(err)
	}
	if ls, err := l.List(); err != nil || len(ls) != 1 || ls[0].Key() != "n/b" {
		t.Fatalf("after Rebuild: %+v, %v", ls, err)
	}
	if old, err := os.ReadFile(aside); err != nil || len(old) != len(data) {
		t.Errorf("old file aside: %d bytes, %v", len(old), err)
	}
}

// TestCheckBlessesASoundFile: a sound ledger whose sum is missing or
// stale is checked by a process of its own, works, and gets its sum.
func TestCheckBlessesASoundFile(t *testing.T) {
	l := New(t.TempDir())
	l.Alive = func(Lease) bool { return true }
	if _, _, err := l.Acquire(lease("n", "a", "t", one(1)), Quota{}); err != nil {
		t.Fatal(err)
	}
	sumFile := l.Path + ".sum"
	if err := os.WriteFile(sumFile, []byte("stale\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ls, err := l.List(); err != nil || len(ls) != 1 {
		t.Fatalf("List with a stale sum: %+v, %v", ls, err)
	}
	data, _ := os.ReadFile(l.Path)
	got, _ := os.ReadFile(sumFile)
	sum := sha256.Sum256(data)
	if strings.TrimSpace(string(got)) != hex.EncodeToString(sum[:]) {
		t.Errorf("sum after the check %q, want the file's", got)
	}
}

func TestTxFailedClass(t *testing.T) {
	l := New("/state")
	for _, tc := range []struct {
		name string
		err  error
		is   func(error) bool
	}{
		{"a lease that does not decode stays DataLoss", fmt.Errorf("lease x: %w", errdefs.ErrDataLoss), errdefs.IsDataLoss},
		{"a refused argument keeps its class", fmt.Errorf("bad: %w", errdefs.ErrInvalidArgument), errdefs.IsInvalidArgument},
		{"a write past the largest file is a corrupt ledger", &os.PathError{Op: "write", Path: "/state/ledger.db", Err: unix.EFBIG}, errdefs.IsDataLoss},
		{"a full disk is a failed precondition", &os.PathError{Op: "write", Path: "/state/ledger.db", Err: unix.ENOSPC}, errdefs.IsFailedPrecondition},
		{"an unclassed error is a failed precondition", errors.New("tx closed"), errdefs.IsFailedPrecondition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := l.txFailed("gc: ", tc.err)
			if !tc.is(got) {
				t.Fatalf("txFailed(%v) = %v: wrong class", tc.err, got)
			}
			if !strings.Contains(got.Error(), "/state/ledger.db") || !strings.Contains(got.Error(), "gc: ") {
				t.Fatalf("txFailed(%v) = %q: does not name the ledger and the operation", tc.err, got)
			}
		})
	}
}

func TestAcquirePort(t *testing.T) {
	at := func(l Lease, netns, host string, port uint16) Lease {
		l.Listen = &Listen{NetNS: netns, Host: host, Port: port}
		return l
	}
	dead := func(l Lease) Lease {
		l.Owner.Start++ // the shim's pid now names another process
		return l
	}
	const refused = "the zygote's exchange port"
	tests := []struct {
		name  string
		first Lease
		next  Lease
		err   string // "": admitted
		want  []string
	}{
		{"same port, host network", at(lease("n", "a", "t1", one(1)), "netns:4:4026531840", "0.0.0.0", 18515),
			at(lease("n", "b", "t2", one(1)), "netns:4:4026531840", "0.0.0.0", 18515),
			"the zygote's exchange port 0.0.0.0:18515 is held by another zygote in the same network namespace", []string{"n/a"}},
		{"same tenant too", at(lease("n", "a", "t", one(1)), "netns:4:4026531840", "0.0.0.0", 18515),
			at(lease("n", "b", "t", one(1)), "netns:4:4026531840", "0.0.0.0", 18515), refused, []string{"n/a"}},
		{"an address against the wildcard", at(lease("n", "a", "t", one(1)), "netns:4:4026531840", "10.0.2.15", 18515),
			at(lease("n", "b", "t", one(1)), "netns:4:4026531840", "0.0.0.0", 18515), refused, []string{"n/a"}},
		{"the wildcard against an address", at(lease("n", "a", "t", one(1)), "netns:4:4026531840", "0.0.0.0", 18515),
			at(lease("n", "b", "t", one(1)), "netns:4:4026531840", "10.0.2.15", 18515), refused, []string{"n/a"}},
		{"one pod's namespace", at(lease("n", "a", "t", one(1)), "netns:4:4026532281", "0.0.0.0", 18515),
			at(lease("n", "b", "t", one(1)), "netns:4:4026532281", "0.0.0.0", 18515),
			"0.0.0.0:18515 is held by another zygote in the same network namespace", []string{"n/a"}},
		{"two addresses", at(lease("n", "a", "t", one(1)), "netns:4:4026531840", "10.0.2.15", 18515),
			at(lease("n", "b", "t", one(1)), "netns:4:4026531840", "10.0.3.15", 18515), "", []string{"n/a", "n/b"}},
		{"two ports", at(lease("n", "a", "t", one(1)), "netns:4:4026531840", "0.0.0.0", 18515),
			at(lease("n", "b", "t", one(1)), "netns:4:4026531840", "0.0.0.0", 18516), "", []string{"n/a", "n/b"}},
		{"two pods' namespaces", at(lease("n", "a", "t", one(1)), "netns:4:4026532281", "0.0.0.0", 18515),
			at(lease("n", "b", "t", one(1)), "netns:4:4026532282", "0.0.0.0", 18515), "", []string{"n/a", "n/b"}},
		{"a pod's namespace and the host's", at(lease("n", "a", "t", one(1)), "netns:4:4026531840", "0.0.0.0", 18515),
			at(lease("n", "b", "t", one(1)), "netns:4:4026532281", "0.0.0.0", 18515), "", []string{"n/a", "n/b"}},
		{"no listener", lease("n", "a", "t", one(1)),
			at(lease("n", "b", "t", one(1)), "netns:4:4026531840", "0.0.0.0", 18515), "", []string{"n/a", "n/b"}},
		{"a retried Create of the holder", at(lease("n", "a", "t", one(1)), "netns:4:4026531840", "0.0.0.0", 18515),
			at(lease("n", "a", "t", one(1)), "netns:4:4026531840", "0.0.0.0", 18515), "", []string{"n/a"}},
		{"a holder that is gone", dead(at(lease("n", "a", "t", one(1)), "netns:4:4026531840", "0.0.0.0", 18515)),
			at(lease("n", "b", "t", one(1)), "netns:4:4026531840", "0.0.0.0", 18515), "", []string{"n/b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := New(t.TempDir())
			if _, _, err := l.Acquire(tc.first, Quota{}); err != nil {
				t.Fatal(err)
			}
			_, _, err := l.Acquire(tc.next, Quota{})
			if tc.err == "" && err != nil {
				t.Fatalf("second lease refused: %v", err)
			}
			if tc.err != "" {
				var pe *PortError
				if !errors.As(err, &pe) || !errdefs.IsFailedPrecondition(err) {
					t.Fatalf("error %v, want a FailedPrecondition PortError", err)
				}
				if !strings.Contains(err.Error(), tc.err) {
					t.Errorf("error %q does not contain %q", err, tc.err)
				}
				if pe.Holder != "n/a" {
					t.Errorf("Holder = %q, want n/a", pe.Holder)
				}
				if strings.Contains(err.Error(), "n/a") || strings.Contains(err.Error(), "t1") {
					t.Errorf("error %q names the holder (another tenant's container)", err)
				}
			}
			got, err := l.List()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(keys(got), tc.want) {
				t.Errorf("ledger holds %q, want %q", keys(got), tc.want)
			}
		})
	}
}

// TestUIDRanges: each lease that asks gets the lowest function uid range
// no live lease holds (other tenants' included); a released or dead
// lease's range is given again; with every range held the lease is
// refused (ResourceExhausted) and not recorded.
func TestUIDRanges(t *testing.T) {
	l := New(t.TempDir())
	alive := map[string]bool{}
	l.Alive = func(x Lease) bool { return !alive[x.Key()+"-dead"] }
	q := Quota{UIDRanges: 3}
	get := func(id, tenant string) (int, error) {
		got, _, err := l.Acquire(lease("n", id, tenant, one(1)), q)
		if err != nil {
			return -1, err
		}
		if got.UIDRange == nil {
			t.Fatalf("lease %s got no uid range", id)
		}
		all, _ := l.List()
		for _, x := range all {
			if x.Key() == "n/"+id && (x.UIDRange == nil || *x.UIDRange != *got.UIDRange) {
				t.Fatalf("the ledger records %s's range %v, Acquire said %d", id, x.UIDRange, *got.UIDRange)
			}
		}
		return *got.UIDRange, nil
	}
	for _, tc := range []struct {
		id, tenant string
		want       int
	}{{"a", "t1", 0}, {"b", "t2", 1}, {"c", "t1", 2}} {
		if got, err := get(tc.id, tc.tenant); err != nil || got != tc.want {
			t.Fatalf("%s: range %d, %v; want %d", tc.id, got, err, tc.want)
		}
	}
	if _, err := get("d", "t3"); !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "all 3 function uid ranges of this node are held") {
		t.Fatalf("a fourth: %v, want ResourceExhausted", err)
	}
	if all, _ := l.List(); len(all) != 3 {
		t.Fatalf("the refused lease was recorded: %q", keys(all))
	}
	// a retried Create keeps its place; a released range is given again
	if got, err := get("b", "t2"); err != nil || got != 1 {
		t.Fatalf("b again: %d, %v; want 1", got, err)
	}
	if _, err := l.Release("n", "b", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := get("e", "t3"); err != nil || got != 1 {
		t.Fatalf("after b's release: %d, %v; want 1", got, err)
	}
	// a dead container's range is reclaimed with its lease
	alive["n/a-dead"] = true
	if got, err := get("f", "t1"); err != nil || got != 0 {
		t.Fatalf("after a died: %d, %v; want 0", got, err)
	}
	// a lease that does not ask takes none, and holds none
	got, _, err := l.Acquire(lease("n", "g", "t1", one(1)), Quota{})
	if err != nil || got.UIDRange != nil {
		t.Fatalf("a lease without ranges: %v, %v", got.UIDRange, err)
	}
}

// TestCheckRefusesKeysOutOfOrder: a ledger whose leaf holds a key out of
// order (lease n/a's key turned into n/x, now before n/b to n/h) reads,
// decodes and takes writes, yet bbolt's lookups, which search in order,
// no longer find every lease: a Create's lease could be recorded twice
// and a release miss. bbolt's consistency check in the ledger's check
// finds it: the file is corrupt before any operation opens it.
func TestCheckRefusesKeysOutOfOrder(t *testing.T) {
	l := New(t.TempDir())
	l.Alive = func(Lease) bool { return true }
	for _, id := range strings.Split("abcdefgh", "") { // a bucket of its own pages, not inline
		if _, _, err := l.Acquire(lease("n", id, "t", one(1)), Quota{}); err != nil {
			t.Fatal(err)
		}
	}
	// the key in the leaf in use (freed pages keep older copies)
	db, err := bolt.Open(l.Path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	var leaves []int
	err = db.View(func(tx *bolt.Tx) error {
		for id := 2; int64(id*db.Info().PageSize) < tx.Size(); id++ {
			p, err := tx.Page(id)
			if err != nil {
				return err
			}
			if p != nil && p.Type == "leaf" {
				leaves = append(leaves, id)
			}
		}
		return nil
	})
	pageSize := db.Info().PageSize
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(l.Path)
	if err != nil {
		t.Fatal(err)
	}
	i := -1
	for _, id := range leaves {
		if j := strings.Index(string(data[id*pageSize:(id+1)*pageSize]), "n/a"); j >= 0 {
			i = id*pageSize + j
		}
	}
	if i < 0 {
		t.Fatalf("no leaf in use (pages %v) holds key n/a", leaves)
	}
	data[i+2] = 'x'
	if err := os.WriteFile(l.Path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = l.List()
	if !errdefs.IsDataLoss(err) || !strings.Contains(err.Error(), "than previous element") {
		t.Fatalf("List(keys out of order) = %v, want DataLoss naming the misordered key", err)
	}
}
