package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	bolt "go.etcd.io/bbolt"

	"github.com/swift-rdma/swift-containerd/internal/atomicfile"
)

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
