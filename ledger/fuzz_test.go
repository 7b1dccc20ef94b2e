package ledger

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

// baseLedger writes a ledger with a few leases and returns its bytes.
func baseLedger(f *testing.F) []byte {
	dir := f.TempDir()
	l := New(dir)
	l.Alive = func(Lease) bool { return true }
	for _, id := range []string{"a", "b", "c"} {
		x := Lease{Namespace: "n", ID: id, Tenant: "t", Devices: []string{"rxe0"}, Charge: Amounts{Containers: 1, QPs: 4}}
		if _, _, err := l.Acquire(x, Quota{}); err != nil {
			f.Fatal(err)
		}
	}
	b, err := os.ReadFile(l.Path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzCorruptLedger: a ledger file truncated or with bytes flipped never
// crashes the process that opens it: every operation returns, and an
// error is a DataLoss (corrupt) or FailedPrecondition one. The input is a
// truncation (2 bytes) then (offset, xor) triples applied to a valid file.
func FuzzCorruptLedger(f *testing.F) {
	base := baseLedger(f)
	f.Add([]byte{0xff, 0xff})                   // unchanged
	f.Add([]byte{0x00, 0x10})                   // truncated to 1/16
	f.Add([]byte{0xff, 0xff, 0x00, 0x10, 0xff}) // a meta page byte
	f.Add([]byte{0xff, 0xff, 0x30, 0x10, 0x01}) // a leaf page byte
	f.Add([]byte{0xff, 0xff, 0x30, 0x00, 0x02, 0x30, 0x08, 0x80})
	f.Add([]byte{0xff, 0xff, 0x20, 0x00, 0xff, 0x20, 0x01, 0xff}) // the freelist page
	f.Fuzz(func(t *testing.T, in []byte) {
		data := append([]byte(nil), base...)
		if len(in) >= 2 {
			n := (int(in[0])<<8 | int(in[1])) * len(data) / 0xffff
			data = data[:n]
			in = in[2:]
		}
		for ; len(in) >= 3 && len(data) > 0; in = in[3:] {
			data[(int(in[0])<<8|int(in[1]))*16%len(data)] ^= in[2]
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		l := New(dir)
		l.Timeout = 2 * time.Second
		l.CheckTimeout = time.Second // a tree bbolt loops on is a time-out, five times over
		l.Alive = func(x Lease) bool { return x.ID != "b" }
		ok := func(what string, err error) {
			if err != nil && !errdefs.IsDataLoss(err) && !errdefs.IsFailedPrecondition(err) {
				t.Errorf("%s on a corrupt ledger: %v (want DataLoss or FailedPrecondition)", what, err)
			}
		}
		_, err := l.List()
		ok("List", err)
		_, err = l.GC(true)
		ok("GC --dry-run", err)
		_, _, err = l.Acquire(Lease{Namespace: "n", ID: "d", Tenant: "t", Charge: Amounts{Containers: 1}}, Quota{Limit: Amounts{Containers: 10}})
		ok("Acquire", err)
		_, err = l.Release("n", "a", nil)
		ok("Release", err)
		_, err = l.GC(false)
		ok("GC", err)
	})
}
