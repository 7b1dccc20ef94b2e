package keys

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/errdefs"
)

func hexKey(b byte) string { return strings.Repeat(hex.EncodeToString([]byte{b}), KeyLen) }

func TestParse(t *testing.T) {
	good := "# a ring\n\nk2 " + hexKey(0xbb) + "\n  k1   " + hexKey(0xaa) + "  \n"
	r, err := Parse("ring", []byte(good))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(r) != 2 || r[0].ID != "k2" || r[1].ID != "k1" || r[0].Key[0] != 0xbb || r[1].Key[31] != 0xaa {
		t.Fatalf("Parse = %+v", r)
	}
	bad := []struct{ name, in, want string }{
		{"empty", "", "ring: no key"},
		{"comments only", "# x\n\n", "ring: no key"},
		{"one field", "k1\n", "ring:1: want"},
		{"three fields", "k1 " + hexKey(1) + " x\n", "ring:1: want"},
		{"upper-case id", "K1 " + hexKey(1) + "\n", `ring:1: key id "K1"`},
		{"long id", "abcdefghijklmnopq " + hexKey(1) + "\n", "ring:1: key id"},
		// the exchange's hello holds an id of 15 and its NUL
		{"id of 16", "abcdefghijklmnop " + hexKey(1) + "\n", `ring:1: key id "abcdefghijklmnop": want 1 to 15`},
		{"short key", "k1 " + hexKey(1)[:62] + "\n", "ring:1: key k1: want 64 hex digits"},
		{"long key", "k1 " + hexKey(1) + "00\n", "ring:1: key k1"},
		{"not hex", "k1 " + strings.Repeat("zz", 32) + "\n", "ring:1: key k1"},
		{"id twice", "k1 " + hexKey(1) + "\nk1 " + hexKey(2) + "\n", `ring:2: key id "k1" given twice`},
		{"too many", strings.Repeat("x", 0) + func() string {
			var b strings.Builder
			for i := 0; i < MaxKeys+1; i++ {
				b.WriteString(string(rune('a'+i)) + " " + hexKey(byte(i)) + "\n")
			}
			return b.String()
		}(), "more than 8 keys"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("ring", []byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errdefs.IsInvalidArgument(err) {
				t.Fatalf("Parse = %v, want an InvalidArgument containing %q", err, tc.want)
			}
		})
	}
}

func TestFormatRoundTrip(t *testing.T) {
	a, _ := New("a")
	b, _ := New("b")
	r := Ring{a, b}
	got, err := Parse("x", r.Format())
	if err != nil || len(got) != 2 || got[0].ID != "a" || !bytes.Equal(got[1].Key, b.Key) {
		t.Fatalf("round trip = %+v, %v", got, err)
	}
}

func TestFingerprint(t *testing.T) {
	// SHA-256 of 32 zero bytes begins 66687aadf862bd77
	k := Key{ID: "z", Key: make([]byte, KeyLen)}
	if got := k.Fingerprint(); got != "66687aadf862bd77" {
		t.Fatalf("Fingerprint = %s", got)
	}
}

func TestNewAndRotate(t *testing.T) {
	k1, err := New("k1")
	if err != nil || len(k1.Key) != KeyLen {
		t.Fatalf("New = %+v, %v", k1, err)
	}
	k2, _ := New("k2")
	if bytes.Equal(k1.Key, k2.Key) {
		t.Fatal("two new keys are equal")
	}
	if _, err := New("Bad"); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("New(Bad) = %v", err)
	}
	if d, err := New(""); err != nil || !ValidID(d.ID) {
		t.Fatalf("New(\"\") = %q, %v", d.ID, err)
	}
	k3, _ := New("k3")
	r, err := Ring{k2, k1}.Rotate(k3, 2)
	if err != nil || len(r) != 2 || r[0].ID != "k3" || r[1].ID != "k2" {
		t.Fatalf("Rotate = %+v, %v", r, err)
	}
	if _, err := r.Rotate(k3, 2); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("Rotate with an ID already there = %v", err)
	}
	if _, err := r.Rotate(k1, 0); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("Rotate keep 0 = %v", err)
	}
}

func TestReadWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t1.keys")
	k, _ := New("k1")
	if err := Write(path, Ring{k}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o400 {
		t.Errorf("mode %04o, want 0400", st.Mode().Perm())
	}
	r, err := Read(path)
	if err != nil || len(r) != 1 || !bytes.Equal(r[0].Key, k.Key) {
		t.Fatalf("Read = %+v, %v", r, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), "mode 0644") {
		t.Fatalf("Read of a 0644 ring = %v, want the mode named", err)
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Read of a directory = %v", err)
	}
	big := filepath.Join(dir, "big.keys")
	os.WriteFile(big, bytes.Repeat([]byte("#"), 5000), 0o600)
	if _, err := Read(big); err == nil || !strings.Contains(err.Error(), "larger than 4096") {
		t.Fatalf("Read of a big file = %v", err)
	}
}

func TestLocalRing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	var wg sync.WaitGroup
	paths := make([]string, 8)
	for i := range paths {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			paths[i], _ = LocalRing(dir, "t1")
		}(i)
	}
	wg.Wait()
	first, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if b, _ := os.ReadFile(p); !bytes.Equal(b, first) {
			t.Fatal("concurrent callers got different rings")
		}
	}
	r, err := Read(paths[0])
	if err != nil || len(r) != 1 || r[0].ID != LocalID {
		t.Fatalf("local ring = %+v, %v", r, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("k1 " + hexKey(1) + "\n"))
	f.Add([]byte("# c\nk2 " + hexKey(2) + "\nk1 " + hexKey(1)))
	f.Add([]byte("k1 zz\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse("f", b)
		if err != nil {
			return
		}
		if len(r) < 1 || len(r) > MaxKeys {
			t.Fatalf("%d keys", len(r))
		}
		again, err := Parse("f", r.Format())
		if err != nil || len(again) != len(r) {
			t.Fatalf("a parsed ring does not round-trip: %v", err)
		}
		for i := range r {
			if !ValidID(r[i].ID) || len(r[i].Key) != KeyLen || again[i].ID != r[i].ID || !bytes.Equal(again[i].Key, r[i].Key) {
				t.Fatalf("key %d changed in the round trip", i)
			}
		}
	})
}

// TestReadTrusted plays another user (uid 65534) against a ring fed to
// zygotes: theirs, in a directory their group may write, or reached
// through a link to theirs is refused by ReadTrusted, naming the entry at
// fault; Read (swiftctl keys, an operator's own rings) reads them all. A
// root ring in a sticky world-writable directory such as /tmp is fine. It
// needs root (chown).
func TestReadTrusted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestReadTrusted gives rings to another user (chown) and needs root (euid 0)")
	}
	const nobody = 65534
	ring := func(t *testing.T, p string, uid int) {
		t.Helper()
		k, _ := New("k1")
		if err := Write(p, Ring{k}); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	dir := func(t *testing.T, p string, mode os.FileMode) {
		t.Helper()
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, d string) string // the ring's path
		want  string                              // ReadTrusted's error ({D} is the test's directory), "" none
	}{
		{"root's ring", func(t *testing.T, d string) string {
			ring(t, filepath.Join(d, "t1.keys"), 0)
			return filepath.Join(d, "t1.keys")
		}, ""},
		{"root's ring in a sticky world-writable directory", func(t *testing.T, d string) string {
			dir(t, filepath.Join(d, "tmp"), os.ModeSticky|0o777)
			ring(t, filepath.Join(d, "tmp", "t1.keys"), 0)
			return filepath.Join(d, "tmp", "t1.keys")
		}, ""},
		{"a ring of another user", func(t *testing.T, d string) string {
			ring(t, filepath.Join(d, "t1.keys"), nobody)
			return filepath.Join(d, "t1.keys")
		}, "keyring {D}/t1.keys: {D}/t1.keys is owned by uid 65534 with mode -r--------: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {D}/t1.keys; chmod go-w {D}/t1.keys): failed precondition"},
		{"root's ring in a directory its group may write", func(t *testing.T, d string) string {
			dir(t, filepath.Join(d, "keys"), 0o770)
			ring(t, filepath.Join(d, "keys", "t1.keys"), 0)
			return filepath.Join(d, "keys", "t1.keys")
		}, "keyring {D}/keys/t1.keys: {D}/keys is owned by uid 0 with mode drwxrwx---: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {D}/keys; chmod go-w {D}/keys): failed precondition"},
		{"a link to a ring of another user", func(t *testing.T, d string) string {
			ring(t, filepath.Join(d, "theirs.keys"), nobody)
			if err := os.Symlink("theirs.keys", filepath.Join(d, "t1.keys")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(d, "t1.keys")
		}, "keyring {D}/t1.keys: {D}/theirs.keys is owned by uid 65534 with mode -r--------: it and every directory above it must be owned by root " +
			"and not writable by group or others (chown root:root {D}/theirs.keys; chmod go-w {D}/theirs.keys): failed precondition"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := t.TempDir()
			path := tc.setup(t, d)
			if r, err := Read(path); err != nil || len(r) != 1 {
				t.Errorf("Read = %v, %v; want the ring", r, err)
			}
			r, err := ReadTrusted(path)
			if tc.want == "" {
				if err != nil || len(r) != 1 {
					t.Fatalf("ReadTrusted = %v, %v; want the ring", r, err)
				}
				return
			}
			want := strings.ReplaceAll(tc.want, "{D}", d)
			if err == nil || err.Error() != want || !errdefs.IsFailedPrecondition(err) {
				t.Fatalf("ReadTrusted = %v\nwant the FailedPrecondition %s", err, want)
			}
			// what the shim reads: a provisioned ring, a node-local one
			if _, _, err := Provisioned(d, path, "t1"); err == nil || err.Error() != "tenant t1's keyring: "+want {
				t.Errorf("Provisioned = %v\nwant tenant t1's keyring: %s", err, want)
			}
			if _, err := LocalRing(filepath.Dir(path), "t1"); err == nil || err.Error() != "node-local keyring of tenant t1: "+want+" (remove it to make a new one)" {
				t.Errorf("LocalRing = %v", err)
			}
		})
	}
}

// TestPairRing: the pair keys a zygote gets, against HMAC-SHA-256 computed
// by Python's hmac module; a pair's key is the same from either end.
func TestPairRing(t *testing.T) {
	k2 := make([]byte, KeyLen)
	for i := range k2 {
		k2[i] = byte(i)
	}
	k1 := bytes.Repeat([]byte{0xff}, KeyLen)
	r := Ring{{ID: "k2", Key: k2}, {ID: "k1", Key: k1}}
	got := string(r.PairRing("t1", "b.team-a", []string{"a.team-a", "c.team-c"}))
	want := "# Swift pair keys of zygote b.team-a of tenant t1: <id> <key> <peer>, newest first\n" +
		"k2 17cd4e0b9abefa677b399c4723cfbf2461916c7f84eea9ce1da38a6cafe44075 a.team-a\n" +
		"k1 f39103134ac7b1fce86720312a1ab2132e3aca09fd051567cab1e6b73a840c99 a.team-a\n"
	if !strings.HasPrefix(got, want) {
		t.Fatalf("PairRing:\n%s\nwant it to start with:\n%s", got, want)
	}
	if hex.EncodeToString(PairKey(k2, "t1", "a.team-a", "c.team-c")) != "b711dbe27c54b3a568c0ccdb28006f79c8de2cbc5b55b885a0580da8f6984284" {
		t.Errorf("PairKey(a.team-a, c.team-c) = %x", PairKey(k2, "t1", "a.team-a", "c.team-c"))
	}
	if !bytes.Equal(PairKey(k2, "t1", "b.team-a", "a.team-a"), PairKey(k2, "t1", "a.team-a", "b.team-a")) {
		t.Errorf("a pair's key differs between its two ends")
	}
	if bytes.Equal(PairKey(k2, "t1", "a", "b"), PairKey(k2, "t2", "a", "b")) {
		t.Errorf("two tenants that share a ring get one pair key for the same names")
	}
	if n := strings.Count(got, "\n"); n != 1+2*2 {
		t.Errorf("PairRing holds %d lines, want a header and 2 keys × 2 peers:\n%s", n, got)
	}
	if none := string(r.PairRing("t1", "z", nil)); strings.Count(none, "\n") != 1 || !strings.HasPrefix(none, "#") {
		t.Errorf("PairRing without peers = %q, want its header only", none)
	}
}
