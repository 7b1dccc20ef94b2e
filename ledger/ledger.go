package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// FileName is the ledger's name in the state dir.
const FileName = "ledger.db"

// DefaultTimeout bounds how long an operation waits for another process
// holding the ledger. Creates queue on it: 64 parallel creates on 2 CPUs
// took 15 s in all, and with 5 s here some of them gave up waiting.
const DefaultTimeout = 30 * time.Second

var bucket = []byte("leases")

// Amounts are resource amounts: a lease's charge, a tenant's usage, or a
// quota (where 0 means no limit).
type Amounts struct {
	Containers uint64 `json:"containers"`
	QPs        uint64 `json:"qps"`
	HCAHandle  uint64 `json:"hca_handle"`
	HCAObject  uint64 `json:"hca_object"`
	Memlock    uint64 `json:"memlock"`
}

// Resources names the resources in the order messages and tables list them.
var Resources = []string{"containers", "qps", "hca_handle", "hca_object", "memlock"}

// Get returns the amount of resource (one of Resources).
func (a Amounts) Get(resource string) uint64 {
	switch resource {
	case "containers":
		return a.Containers
	case "qps":
		return a.QPs
	case "hca_handle":
		return a.HCAHandle
	case "hca_object":
		return a.HCAObject
	case "memlock":
		return a.Memlock
	}
	return 0
}

// Add returns a+b, saturating at the largest uint64 (which prints as unlimited memlock).
func (a Amounts) Add(b Amounts) Amounts {
	return Amounts{sat(a.Containers, b.Containers), sat(a.QPs, b.QPs), sat(a.HCAHandle, b.HCAHandle),
		sat(a.HCAObject, b.HCAObject), sat(a.Memlock, b.Memlock)}
}

func sat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// Format prints an amount of resource: bytes for memlock.
func Format(resource string, n uint64) string {
	if resource != "memlock" {
		return strconv.FormatUint(n, 10)
	}
	return config.FormatBytes(n)
}

// Owner is the shim process that holds a lease.
type Owner struct {
	PID int `json:"pid"`
	// Start is the process's start time (clock ticks after boot, field 22
	// of /proc/PID/stat): a recycled PID has another.
	Start uint64 `json:"start"`
	// PIDNS is the inode of the owner's PID namespace (0: not recorded):
	// its PID means nothing to a process in another one.
	PIDNS uint64 `json:"pidns,omitempty"`
}

// Self returns the calling process as an Owner.
func Self() Owner {
	pid := os.Getpid()
	start, _, _ := procStat("/proc", pid)
	return Owner{PID: pid, Start: start, PIDNS: pidNS("/proc")}
}

// pidNS returns the inode of the PID namespace /proc/self lives in (0
// when it cannot be read).
func pidNS(proc string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(proc, "self", "ns", "pid"), &st); err != nil {
		return 0
	}
	return st.Ino
}

// procStat returns a process's start time and state letter.
func procStat(proc string, pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return start, f[0][0], err
}

// Lease is what one container holds.
type Lease struct {
	Namespace string    `json:"namespace"`
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	Devices   []string  `json:"devices"`
	Charge    Amounts   `json:"charge"`
	Bundle    string    `json:"bundle"`
	Owner     Owner     `json:"owner"`
	Created   time.Time `json:"created"`
	// Listen is the QP exchange port the container's zygote listens on
	// (nil: none): two live leases never hold one port in one network
	// namespace.
	Listen *Listen `json:"listen,omitempty"`
	// UIDRange is the range of function uids the container's zygote gives
	// its functions (nil: none of its own), an index below the ranges
	// Acquire was given: two live leases never hold one.
	UIDRange *int `json:"uid_range,omitempty"`
}

// Listen is a zygote's exchange address and the network namespace it
// listens in.
type Listen struct {
	// NetNS names the network namespace, "netns:DEV:INO" (the node's own
	// for a container of the host network, a pod's for its containers).
	NetNS string `json:"netns"`
	Host  string `json:"host"` // IPv4, 0.0.0.0 for every address
	Port  uint16 `json:"port"`
}

// Conflicts tells whether a and b cannot both listen: one namespace, one
// port, and the same address or the wildcard on either side.
func (a Listen) Conflicts(b Listen) bool {
	return a.NetNS == b.NetNS && a.Port == b.Port &&
		(a.Host == b.Host || a.Host == "0.0.0.0" || b.Host == "0.0.0.0")
}

func (a Listen) String() string { return fmt.Sprintf("%s:%d", a.Host, a.Port) }

// PortError is an Acquire refused because another live lease's zygote
// listens on the port asked for. Its message does not name the holder
// (it may be another tenant's): Holder is for the node's own log.
type PortError struct {
	Want   Listen
	Holder string // the holder's key, namespace/ID
}

func (e *PortError) Error() string {
	return fmt.Sprintf("the zygote's exchange port %s is held by another zygote in the same network namespace: give each zygote its own port (annotation swift.io/listen, and the peers that dial it): %v",
		e.Want, errdefs.ErrFailedPrecondition)
}

// Unwrap makes PortError a FailedPrecondition error.
func (e *PortError) Unwrap() error { return errdefs.ErrFailedPrecondition }

// Key is the lease's key: namespace/ID.
func (l Lease) Key() string { return l.Namespace + "/" + l.ID }

// Alive tells whether the container of a lease may still exist: its
// bundle directory is there and its shim process runs (same PID and start
// time, not a zombie). When in doubt it says alive, so that a lease is
// never reclaimed from a container that runs: a stat error other than
// "not found", a bundle whose containerd task directory is not seen
// either (another mount namespace), a /proc that cannot be read (EMFILE,
// EACCES), one that does not show every process (hidepid, or no PID 1),
// or a caller in another PID namespace than the shim's.
func Alive(l Lease) bool { return aliveIn("/proc", pidNS("/proc"), l) }

func aliveIn(proc string, selfNS uint64, l Lease) bool {
	if l.Bundle != "" {
		// a bundle counts as gone only where containerd's task directory
		// (…/io.containerd.runtime.v2.task, two levels up) is seen: a
		// caller in another mount namespace sees neither
		if _, err := os.Stat(l.Bundle); errors.Is(err, os.ErrNotExist) {
			if _, err := os.Stat(filepath.Dir(filepath.Dir(l.Bundle))); err == nil {
				return false
			}
		}
	}
	if l.Owner.PID <= 0 {
		return true
	}
	// Can this /proc judge the owner's PID at all?
	if l.Owner.PIDNS != 0 && l.Owner.PIDNS != selfNS {
		return true
	}
	if _, _, err := procStat(proc, 1); err != nil {
		return true
	}
	start, state, err := procStat(proc, l.Owner.PID)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false
	case err != nil:
		return true
	}
	return !((l.Owner.Start != 0 && start != l.Owner.Start) || state == 'Z' || state == 'X')
}

// Quota is a tenant's node-wide quota (zero fields: no limit) and where it
// comes from, for messages.
type Quota struct {
	Limit  Amounts
	Source string
	// UIDRanges, when above 0, gives the lease a function uid range of
	// its own: the lowest index below UIDRanges no live lease holds.
	UIDRanges int
}

// UIDRangeError is an Acquire refused because every function uid range of
// the node is held by a live lease. It is a ResourceExhausted error.
type UIDRangeError struct {
	Ranges int
}

func (e *UIDRangeError) Error() string {
	return fmt.Sprintf("all %d function uid ranges of this node are held by running zygote containers: %v", e.Ranges, errdefs.ErrResourceExhausted)
}

// Unwrap makes UIDRangeError a ResourceExhausted error.
func (e *UIDRangeError) Unwrap() error { return errdefs.ErrResourceExhausted }

// QuotaError is an Acquire refused because the tenant's node-wide quota is
// used up. It is a ResourceExhausted error.
type QuotaError struct {
	Tenant, Resource   string
	Limit, Used, Asked uint64
	Source             string
}

func (e *QuotaError) Error() string {
	s := fmt.Sprintf("tenant %q is over its node-wide %s quota: limit %s, in use %s, this container asks %s",
		e.Tenant, e.Resource, Format(e.Resource, e.Limit), Format(e.Resource, e.Used), Format(e.Resource, e.Asked))
	if e.Source != "" {
		s += " (" + e.Source + ")"
	}
	return s + ": " + errdefs.ErrResourceExhausted.Error()
}

// Unwrap makes QuotaError a ResourceExhausted error.
func (e *QuotaError) Unwrap() error { return errdefs.ErrResourceExhausted }

// Ledger is the ledger file at Path. Each method opens it, does one
// transaction and closes it.
type Ledger struct {
	Path string
	// Timeout bounds the wait for the lock (DefaultTimeout when 0).
	Timeout time.Duration
	// CheckTimeout bounds a check of a file the ledger's last writer did
	// not leave (DefaultCheckTimeout when 0).
	CheckTimeout time.Duration
	// Alive decides whether a lease's container may still exist (the
	// package's Alive when nil).
	Alive func(Lease) bool
}

// New returns the ledger of a state dir.
func New(stateDir string) *Ledger { return &Ledger{Path: filepath.Join(stateDir, FileName)} }

func (l *Ledger) alive(x Lease) bool {
	if l.Alive != nil {
		return l.Alive(x)
	}
	return Alive(x)
}

// lock takes the ledger's lock file, polling finely (bbolt's own flock
// polls every 50 ms, too coarse when dozens of shims start at once).
func (l *Ledger) lock(exclusive bool) (*os.File, time.Time, error) {
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	dir := filepath.Dir(l.Path)
	if exclusive {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, deadline, fmt.Errorf("ledger %s: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
		}
	}
	f, err := os.OpenFile(l.Path+".lock", os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, deadline, fmt.Errorf("ledger %s: lock file: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	wait := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return f, deadline, nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			f.Close()
			return nil, deadline, fmt.Errorf("ledger %s: lock: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, deadline, fmt.Errorf("ledger %s: still locked by another process after %v: %w", l.Path, timeout, errdefs.ErrUnavailable)
		}
		time.Sleep(wait)
		if wait < 8*time.Millisecond {
			wait *= 2
		}
	}
}

// open locks the ledger and opens the database; release with the returned func.
//
// bbolt opens the file only once check trusts it.
func (l *Ledger) open(readOnly bool) (_ *bolt.DB, _ func(committed bool), retErr error) {
	lf, deadline, err := l.lock(!readOnly)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if retErr != nil {
			lf.Close()
		}
	}()
	if _, err := os.Stat(l.Path); err == nil {
		if err := l.check(); err != nil {
			return nil, nil, err
		}
	}
	remaining := time.Until(deadline)
	if remaining < 100*time.Millisecond {
		remaining = 100 * time.Millisecond
	}
	db, err := bolt.Open(l.Path, 0o600, &bolt.Options{Timeout: remaining, ReadOnly: readOnly})
	if err != nil {
		if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
			return nil, nil, l.corrupt(err)
		}
		return nil, nil, fmt.Errorf("ledger %s: open: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	return db, func(committed bool) {
		defer lf.Close()
		if db.Close() == nil && !readOnly && committed {
			// what this writer committed is the trusted state
			if data, err := os.ReadFile(l.Path); err == nil {
				_ = l.writeSum(data)
			}
		}
	}, nil
}

// SumFile is the checksum of the ledger as its last writer left it, or
// as the last check found it sound (state_dir/ledger.db.sum).
const SumFile = FileName + ".sum"

// checkArg and salvageArg make a binary that calls RunCheckIfAsked check
// a ledger file, or print what it can read of one.
const (
	checkArg   = "__swift-ledger-check"
	salvageArg = "__swift-ledger-salvage"
)

// DefaultCheckTimeout bounds a check (a corrupt tree can make bbolt loop).
const DefaultCheckTimeout = 10 * time.Second

func (l *Ledger) checkTimeout() time.Duration {
	if l.CheckTimeout > 0 {
		return l.CheckTimeout
	}
	return DefaultCheckTimeout
}

// RunCheckIfAsked is called first in main by every binary that opens the
// ledger (and by this package's TestMain): run as "BINARY
// __swift-ledger-check FILE", it works FILE as the ledger's operations do
// and exits 0 when they all succeed, else non-zero (or it crashes).
func RunCheckIfAsked() {
	if len(os.Args) != 3 || (os.Args[1] != checkArg && os.Args[1] != salvageArg) {
		return
	}
	run := workCopy
	if os.Args[1] == salvageArg {
		run = salvage
	}
	defer func() {
		if r := recover(); r != nil { // a fatal error cannot be caught: its exit status says it
			fmt.Fprintf(os.Stderr, "bbolt: %v\n", r)
			os.Exit(3)
		}
	}()
	// the answer names what was checked (hashed before it is worked): a
	// binary that does not know this argument (an older one, a test
	// binary) cannot bless a file
	data, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	sum := sha256.Sum256(data)
	if err := run(os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	if os.Args[1] == checkArg {
		fmt.Printf("ok %s\n", hex.EncodeToString(sum[:]))
	}
	os.Exit(0)
}

// check makes sure bbolt may open the ledger (the caller holds the lock).
// bbolt trusts the file: on a corrupt one it can panic, fault on the
// mapping, loop, or write bad pointers into the Go heap, which no recover
// survives. So a file is opened only when it is the one its last writer
// left (its checksum is the sum file's), or when a separate process (this
// binary, RunCheckIfAsked) worked a copy of it without failing; then the
// sum file is brought up to date. Anything else is a corrupt error.
func (l *Ledger) check() error {
	data, err := os.ReadFile(l.Path)
	if err != nil {
		return fmt.Errorf("ledger %s: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	if old, err := os.ReadFile(l.Path + ".sum"); err == nil && strings.TrimSpace(string(old)) == want {
		return nil
	}
	run, err := l.runOnCopy(checkArg, data)
	if err != nil {
		return fmt.Errorf("ledger %s: check: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	err = run.err
	if err == nil && strings.TrimSpace(run.stdout) != "ok "+want {
		err = fmt.Errorf("the check answered %q", strings.TrimSpace(run.stdout))
	}
	if err != nil {
		why, _, _ := strings.Cut(strings.TrimSpace(run.stderr), "\n")
		why = strings.TrimPrefix(why, "bbolt: ")
		if run.timedOut {
			why = fmt.Sprintf("a check did not end within %v", l.checkTimeout())
		}
		if why == "" {
			why = err.Error()
		}
		return l.corrupt(why)
	}
	return l.writeSum(data)
}

// selfRun is how a run of this binary on a ledger copy ended.
type selfRun struct {
	stdout, stderr string
	timedOut       bool
	err            error // its exit
}

// runOnCopy writes data to a temporary file beside the ledger and runs
// this very binary on it (/proc/self/exe, even if its path was replaced)
// with arg, for at most its check timeout. The error is the copy's; how the
// run ended is in selfRun.
func (l *Ledger) runOnCopy(arg string, data []byte) (selfRun, error) {
	f, err := os.CreateTemp(filepath.Dir(l.Path), "."+FileName+arg+"-*")
	if err != nil {
		return selfRun{}, err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return selfRun{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.checkTimeout())
	defer cancel()
	var out, errOut strings.Builder
	cmd := exec.CommandContext(ctx, "/proc/self/exe", arg, tmp)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return selfRun{stdout: out.String(), stderr: errOut.String(), timedOut: ctx.Err() != nil, err: err}, nil
}

// writeSum records data's checksum as the ledger's.
func (l *Ledger) writeSum(data []byte) error {
	sum := sha256.Sum256(data)
	if err := atomicfile.Write(l.Path+".sum", []byte(hex.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
		return fmt.Errorf("ledger %s: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// workCopy opens path (a copy), has bbolt check its consistency, and
// works it as the ledger's operations do: bbolt loads its freelist, every
// lease is read and decoded, every one is written back, and a probe key is
// put and deleted (page allocation, the freelist written); then every
// lease is deleted in one transaction (pages freed, the tree rebalanced)
// and put back in another.
func workCopy(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	// bbolt's own consistency check first: every page below the high
	// water mark used once or free, none both, keys in order. A file that
	// passes stays sound through the writes of the ledger's operations,
	// which this work alone does not cover (a page both used and free is
	// handed out by a later commit, not by these).
	if err := db.View(func(tx *bolt.Tx) error {
		var first error
		for err := range tx.Check() {
			if first == nil {
				first = err
			}
		}
		return first
	}); err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		type kv struct{ k, v []byte }
		var all []kv
		err = b.ForEach(func(k, v []byte) error {
			if _, err := decode(k, v); err != nil {
				return err
			}
			all = append(all, kv{append([]byte(nil), k...), append([]byte(nil), v...)})
			return nil
		})
		if err != nil {
			return err
		}
		for _, x := range all {
			if err := b.Put(x.k, x.v); err != nil {
				return err
			}
		}
		probe := []byte("\x00swift-ledger-check")
		if err := b.Put(probe, []byte("{}")); err != nil {
			return err
		}
		return b.Delete(probe)
	})
	if err != nil {
		return err
	}
	// deletions free pages and rebalance the tree (gc, release)
	var all [][2][]byte
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if err := b.ForEach(func(k, v []byte) error {
			all = append(all, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
			return nil
		}); err != nil {
			return err
		}
		for _, x := range all {
			if err := b.Delete(x[0]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		for _, x := range all {
			if err := b.Put(x[0], x[1]); err != nil {
				return err
			}
		}
		return nil
	})
}

// corrupt is the error of a ledger that cannot be read: DataLoss, with
// the way out.
func (l *Ledger) corrupt(why any) error {
	return fmt.Errorf("ledger %s is corrupt (%v): opted-in containers cannot be created until `swiftctl pools repair` rebuilds it: %w",
		l.Path, why, errdefs.ErrDataLoss)
}

// safely runs fn, which reads the memory-mapped ledger: a corrupt file
// makes bbolt panic or fault on a bad page, and either becomes a corrupt
// error instead of a crashed shim (and every container of its pod).
func (l *Ledger) safely(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = l.corrupt(r)
		}
	}()
	return fn()
}

// onBucket runs fn on the lease bucket in one transaction (a write one
// with write), holding the ledger's lock. A missing ledger or bucket has no
// leases: fn does not run. fn's errors come back as "ledger PATH: what...".
func (l *Ledger) onBucket(write bool, what string, fn func(b *bolt.Bucket) error) error {
	if _, err := os.Stat(l.Path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return l.safely(func() error { return l.onBucketUnsafe(write, what, fn) })
}

func (l *Ledger) onBucketUnsafe(write bool, what string, fn func(b *bolt.Bucket) error) error {
	db, done, err := l.open(!write)
	if err != nil {
		return err
	}
	committed := false
	defer func() { done(committed) }()
	run := db.View
	if write {
		run = db.Update
	}
	err = run(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return fn(b)
	})
	if err != nil {
		return l.txFailed(what, err)
	}
	committed = true
	return nil
}

// txFailed wraps the error of a transaction, "ledger PATH: what...". The
// errors of our own functions carry their class; what bbolt returns (a
// commit that could not write) does not get one there: a write past the
// largest file the system allows (EFBIG) comes from a page number no sound
// ledger has, so the ledger is corrupt; any other is FailedPrecondition.
func (l *Ledger) txFailed(what string, err error) error {
	switch {
	case !errors.Is(errdefs.Resolve(err), errdefs.ErrUnknown):
		return fmt.Errorf("ledger %s: %s%w", l.Path, what, err)
	case errors.Is(err, unix.EFBIG), errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum):
		return l.corrupt(fmt.Sprintf("%s%v", what, err))
	default:
		return fmt.Errorf("ledger %s: %s%v: %w", l.Path, what, err, errdefs.ErrFailedPrecondition)
	}
}

func decode(k, v []byte) (Lease, error) {
	var x Lease
	if err := json.Unmarshal(v, &x); err != nil {
		return x, fmt.Errorf("lease %q does not decode (%v; `swiftctl pools repair` rebuilds the ledger): %w", k, err, errdefs.ErrDataLoss)
	}
	return x, nil
}

// Acquire records lease if its tenant's usage plus its charge stays within
// the quota, atomically with respect to every other process using the
// ledger. A lease already recorded under the same key (a retried Create,
// or a stale one) is replaced. Leases of containers that no longer exist
// are reclaimed first, and returned, whether or not the quota admits the
// new one. Over quota the error is a *QuotaError; a lease whose Listen
// conflicts with a live lease's is refused with a *PortError. With
// q.UIDRanges the lease gets a function uid range no live lease holds
// (lease.UIDRange in the returned lease), or a *UIDRangeError.
func (l *Ledger) Acquire(lease Lease, q Quota) (got Lease, reclaimed []Lease, err error) {
	if lease.Namespace == "" || lease.ID == "" || lease.Tenant == "" {
		return lease, nil, fmt.Errorf("lease needs a namespace, an ID and a tenant (got %q/%q tenant %q): %w",
			lease.Namespace, lease.ID, lease.Tenant, errdefs.ErrInvalidArgument)
	}
	if lease.Created.IsZero() {
		lease.Created = time.Now().UTC()
	}
	lease.UIDRange = nil
	var refused error
	err = l.safely(func() error {
		var err error
		got, reclaimed, refused, err = l.acquire(lease, q)
		return err
	})
	if err != nil {
		return got, reclaimed, err
	}
	return got, reclaimed, refused
}

// acquire: refused is the lease's refusal (*QuotaError, *PortError), err
// what kept the ledger from deciding.
func (l *Ledger) acquire(lease Lease, q Quota) (got Lease, reclaimed []Lease, refused error, err error) {
	db, done, err := l.open(false)
	if err != nil {
		return lease, nil, nil, err
	}
	committed := false
	defer func() { done(committed) }()
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		var used Amounts
		var dead [][]byte
		var portErr *PortError
		heldRanges := map[int]bool{}
		err = b.ForEach(func(k, v []byte) error {
			if string(k) == lease.Key() {
				return nil
			}
			x, err := decode(k, v)
			if err != nil {
				return err
			}
			if !l.alive(x) {
				reclaimed = append(reclaimed, x)
				dead = append(dead, append([]byte(nil), k...))
				return nil
			}
			if x.Tenant == lease.Tenant {
				used = used.Add(x.Charge)
			}
			if lease.Listen != nil && x.Listen != nil && portErr == nil && lease.Listen.Conflicts(*x.Listen) {
				portErr = &PortError{Want: *lease.Listen, Holder: x.Key()}
			}
			if x.UIDRange != nil {
				heldRanges[*x.UIDRange] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range dead {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		if portErr != nil {
			refused = portErr
			return nil // commit the reclaimed deletions, not the lease
		}
		for _, r := range Resources {
			lim, u, ask := q.Limit.Get(r), used.Get(r), lease.Charge.Get(r)
			if lim > 0 && (u > lim || ask > lim-u) {
				refused = &QuotaError{Tenant: lease.Tenant, Resource: r, Limit: lim, Used: u, Asked: ask, Source: q.Source}
				return nil // commit the reclaimed deletions, not the lease
			}
		}
		if q.UIDRanges > 0 {
			i := 0
			for i < q.UIDRanges && heldRanges[i] {
				i++
			}
			if i == q.UIDRanges {
				refused = &UIDRangeError{Ranges: q.UIDRanges}
				return nil // commit the reclaimed deletions, not the lease
			}
			lease.UIDRange = &i
		}
		val, err := json.Marshal(lease)
		if err != nil {
			return err
		}
		return b.Put([]byte(lease.Key()), val)
	})
	if err != nil {
		return lease, reclaimed, nil, l.txFailed("acquire "+lease.Key()+": ", err)
	}
	committed = true
	return lease, reclaimed, refused, nil
}

// Release removes the lease of namespace/id and returns it (nil when there
// is none). With owner set, a lease held by another process is left alone.
func (l *Ledger) Release(namespace, id string, owner *Owner) (*Lease, error) {
	return l.releaseIf(namespace, id, func(x Lease, err error) bool {
		return err != nil || owner == nil || x.Owner == *owner
	})
}

// ReleaseBundle removes the lease of namespace/id only if it was taken
// for bundle, in one transaction, and returns it (nil when there is none
// or it is another bundle's; a lease that does not decode is left to gc).
func (l *Ledger) ReleaseBundle(namespace, id, bundle string) (*Lease, error) {
	return l.releaseIf(namespace, id, func(x Lease, err error) bool {
		return err == nil && x.Bundle == bundle
	})
}

// releaseIf removes the lease of namespace/id when match, given the lease
// and its decoding error, says so, in one transaction, and returns it.
func (l *Ledger) releaseIf(namespace, id string, match func(Lease, error) bool) (*Lease, error) {
	var out *Lease
	key := []byte(namespace + "/" + id)
	err := l.onBucket(true, "release "+string(key)+": ", func(b *bolt.Bucket) error {
		v := b.Get(key)
		if v == nil {
			return nil
		}
		x, err := decode(key, v)
		if !match(x, err) {
			return nil
		}
		out = &x
		return b.Delete(key)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// List returns every lease, ordered by key. A missing ledger has none.
func (l *Ledger) List() ([]Lease, error) {
	var out []Lease
	err := l.onBucket(false, "", func(b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			x, err := decode(k, v)
			if err != nil {
				return err
			}
			out = append(out, x)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}

// GC removes the leases of containers that no longer exist and returns
// them; with dryRun it only returns them.
func (l *Ledger) GC(dryRun bool) ([]Lease, error) {
	var dead []Lease
	err := l.onBucket(true, "gc: ", func(b *bolt.Bucket) error {
		var keys [][]byte
		err := b.ForEach(func(k, v []byte) error {
			x, err := decode(k, v)
			if err != nil {
				// An undecodable lease cannot be attributed: drop it.
				x = Lease{ID: string(k)}
			} else if l.alive(x) {
				return nil
			}
			dead = append(dead, x)
			keys = append(keys, append([]byte(nil), k...))
			return nil
		})
		if err != nil || dryRun {
			return err
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return dead, nil
}

// Usage sums the charges of leases per tenant.
func Usage(leases []Lease) map[string]Amounts {
	u := map[string]Amounts{}
	for _, x := range leases {
		u[x.Tenant] = u[x.Tenant].Add(x.Charge)
	}
	return u
}

// BundleFile is the copy of a container's lease the shim keeps in its
// bundle: what `swiftctl pools repair` rebuilds a lost ledger from.
const BundleFile = "swift-lease.json"

// Salvage reads every lease it can from a ledger that may be corrupt:
// those that decode, up to the first bad page. problems says what could
// not be read (none: the ledger is sound). The reading is done by a
// separate process (RunCheckIfAsked) on a copy, which may crash.
func (l *Ledger) Salvage() (leases []Lease, problems []string) {
	data, err := os.ReadFile(l.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []string{err.Error()}
	}
	run, err := l.runOnCopy(salvageArg, data)
	if err != nil {
		return nil, []string{err.Error()}
	}
	for _, line := range strings.Split(run.stdout, "\n") {
		if line == "" {
			continue
		}
		var x Lease
		if err := json.Unmarshal([]byte(line), &x); err != nil {
			problems = append(problems, fmt.Sprintf("salvaged record %q: %v", line, err))
			continue
		}
		leases = append(leases, x)
	}
	for _, line := range strings.Split(strings.TrimSpace(run.stderr), "\n") {
		if line == "" || strings.HasPrefix(line, "goroutine ") || strings.HasPrefix(line, "\t") {
			break // a crash's stack follows
		}
		if len(problems) < 20 {
			problems = append(problems, line)
		}
	}
	if run.err != nil {
		why := run.err.Error()
		if run.timedOut {
			why = fmt.Sprintf("reading did not end within %v", l.checkTimeout())
		}
		problems = append(problems, fmt.Sprintf("ledger %s is corrupt: reading it stopped (%s); %d lease(s) read before", l.Path, why, len(leases)))
	}
	return leases, problems
}

// salvage prints, one JSON line each, the leases of the ledger copy at
// path that decode and are filed under their own key, up to where bbolt
// fails; what it cannot read goes to stderr.
func salvage(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			x, err := decode(k, v)
			if err == nil && x.Key() != string(k) {
				err = fmt.Errorf("lease %q is filed under %q", x.Key(), k)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return nil
			}
			line, _ := json.Marshal(x)
			_, err = fmt.Fprintf(os.Stdout, "%s\n", line)
			return err
		})
	})
}

// Rebuild replaces the ledger with one that holds exactly leases, under
// the ledger's lock; the old file, if any, is kept at aside.
func (l *Ledger) Rebuild(leases []Lease, aside string) error {
	return l.Repair(func([]Lease, []string) ([]Lease, bool, error) { return leases, true, nil }, aside)
}

// Repair holds the ledger's lock while it salvages what it can
// (Salvage), asks decide which leases to keep (and whether to rebuild at
// all), and rebuilds: no Create takes a lease in between, and a new ledger
// is complete before it replaces the old one, which is kept at aside.
func (l *Ledger) Repair(decide func(salvaged []Lease, problems []string) (keep []Lease, rebuild bool, err error), aside string) error {
	lf, deadline, err := l.lock(true)
	if err != nil {
		return err
	}
	defer lf.Close()
	keep, rebuild, err := decide(l.Salvage())
	if err != nil || !rebuild {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(l.Path), "."+FileName+".new-*")
	if err != nil {
		return fmt.Errorf("ledger %s: rebuild: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	tmp := f.Name()
	f.Close()
	defer os.Remove(tmp) // a no-op once it is the ledger
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: max(time.Until(deadline), 100*time.Millisecond)})
	if err != nil {
		return fmt.Errorf("ledger %s: rebuild: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		for _, x := range keep {
			v, err := json.Marshal(x)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(x.Key()), v); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("ledger %s: rebuild: %w", l.Path, err)
	}
	data, err := os.ReadFile(tmp)
	if err != nil {
		return fmt.Errorf("ledger %s: rebuild: %w", l.Path, err)
	}
	if err := os.Link(l.Path, aside); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ledger %s: keep the old file at %s: %v: %w", l.Path, aside, err, errdefs.ErrFailedPrecondition)
	}
	if err := os.Rename(tmp, l.Path); err != nil {
		return fmt.Errorf("ledger %s: rebuild: %v: %w", l.Path, err, errdefs.ErrFailedPrecondition)
	}
	if err := l.writeSum(data); err != nil {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(l.Path))
}
