package nodeconf

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/keys"
)

const goodPolicy = "[tenants.team-a]\nnamespaces = [\"team-a\"]\n"

func TestPolicy(t *testing.T) {
	dir := t.TempDir()
	in := &Installer{PolicyPath: filepath.Join(dir, "swift/policy.toml")}
	for _, tc := range []struct {
		name    string
		data    string
		changed bool
		err     error
		msg     string
		want    string // the file afterwards
	}{
		{"first", goodPolicy, true, nil, "", goodPolicy},
		{"the same again", goodPolicy, false, nil, "", goodPolicy},
		{"a change", goodPolicy + "[tenants.team-b]\nnamespaces = [\"team-b\"]\n", true, nil, "",
			goodPolicy + "[tenants.team-b]\nnamespaces = [\"team-b\"]\n"},
		{"unknown key", goodPolicy + "colour = \"red\"\n", false, errdefs.ErrInvalidArgument, "colour",
			goodPolicy + "[tenants.team-b]\nnamespaces = [\"team-b\"]\n"},
		{"not TOML", "[tenants\n", false, errdefs.ErrInvalidArgument, "policy.toml",
			goodPolicy + "[tenants.team-b]\nnamespaces = [\"team-b\"]\n"},
		{"too big", strings.Repeat("#", maxPolicy+1), false, errdefs.ErrInvalidArgument, "more than",
			goodPolicy + "[tenants.team-b]\nnamespaces = [\"team-b\"]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed, err := in.Policy([]byte(tc.data))
			if !errors.Is(err, tc.err) || (tc.err != nil && !strings.Contains(err.Error(), tc.msg)) || (tc.err == nil && err != nil) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.err, tc.msg)
			}
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
			b, err := os.ReadFile(in.PolicyPath)
			if err != nil || string(b) != tc.want {
				t.Errorf("file = %q (%v), want %q", b, err, tc.want)
			}
			if fi, err := os.Stat(in.PolicyPath); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("mode = %v (%v), want 0644", fi.Mode(), err)
			}
			left, _ := filepath.Glob(filepath.Join(dir, "swift", ".*"))
			if len(left) != 0 {
				t.Errorf("left behind: %q", left)
			}
		})
	}
}

func ring(t *testing.T, id string) []byte {
	t.Helper()
	k, err := keys.New(id)
	if err != nil {
		t.Fatal(err)
	}
	return keys.Ring{k}.Format()
}

func TestKeys(t *testing.T) {
	dir := t.TempDir()
	kd := filepath.Join(dir, "keys")
	in := &Installer{KeysDir: kd}
	// a ring provisioned by hand: never the installer's to remove
	if err := os.MkdirAll(kd, 0o700); err != nil {
		t.Fatal(err)
	}
	hand := ring(t, "hand")
	if err := os.WriteFile(filepath.Join(kd, "ops.keys"), hand, 0o400); err != nil {
		t.Fatal(err)
	}
	a1, a2, b1 := ring(t, "a1"), ring(t, "a2"), ring(t, "b1")
	ls := func() map[string]string {
		out := map[string]string{}
		ents, _ := os.ReadDir(kd)
		for _, e := range ents {
			if e.Name() == StateFile {
				continue
			}
			b, _ := os.ReadFile(filepath.Join(kd, e.Name()))
			fi, _ := e.Info()
			out[e.Name()] = fi.Mode().Perm().String() + " " + string(b)
		}
		return out
	}
	steps := []struct {
		name             string
		files            map[string][]byte
		written, removed []string
		err              error
		msg              string
		want             map[string][]byte // the keys dir afterwards
	}{
		{"two rings", map[string][]byte{"team-a.keys": a1, "team-b.keys": b1}, []string{"team-a.keys", "team-b.keys"}, nil, nil, "",
			map[string][]byte{"ops.keys": hand, "team-a.keys": a1, "team-b.keys": b1}},
		{"the same", map[string][]byte{"team-a.keys": a1, "team-b.keys": b1}, nil, nil, nil, "",
			map[string][]byte{"ops.keys": hand, "team-a.keys": a1, "team-b.keys": b1}},
		{"a rotation", map[string][]byte{"team-a.keys": a2, "team-b.keys": b1}, []string{"team-a.keys"}, nil, nil, "",
			map[string][]byte{"ops.keys": hand, "team-a.keys": a2, "team-b.keys": b1}},
		{"team-b left the Secret", map[string][]byte{"team-a.keys": a2}, nil, []string{"team-b.keys"}, nil, "",
			map[string][]byte{"ops.keys": hand, "team-a.keys": a2}},
		{"a path for a name", map[string][]byte{"team-a.keys": a1, "..keys": b1}, nil, nil, errdefs.ErrInvalidArgument, `"..keys" is not <tenant>.keys`,
			map[string][]byte{"ops.keys": hand, "team-a.keys": a2}},
		{"not a ring", map[string][]byte{"team-a.keys": []byte("not a key\n")}, nil, nil, errdefs.ErrInvalidArgument, "team-a.keys",
			map[string][]byte{"ops.keys": hand, "team-a.keys": a2}},
		{"too big", map[string][]byte{"team-a.keys": []byte(strings.Repeat("x", maxRing+1))}, nil, nil, errdefs.ErrInvalidArgument, "larger than 4096",
			map[string][]byte{"ops.keys": hand, "team-a.keys": a2}},
		{"somebody else's ring of the name", map[string][]byte{"team-a.keys": a2, "ops.keys": b1}, nil, nil, errdefs.ErrFailedPrecondition,
			"ops.keys: another ring of that name, not installed by swift-node",
			map[string][]byte{"ops.keys": hand, "team-a.keys": a2}},
		{"somebody else's ring, the same: taken over", map[string][]byte{"team-a.keys": a2, "ops.keys": hand}, nil, nil, nil, "",
			map[string][]byte{"ops.keys": hand, "team-a.keys": a2}},
		{"the Secret emptied", map[string][]byte{}, nil, []string{"ops.keys", "team-a.keys"}, nil, "",
			map[string][]byte{}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			written, removed, err := in.Keys(st.files)
			if !errors.Is(err, st.err) || (st.err != nil && !strings.Contains(err.Error(), st.msg)) || (st.err == nil && err != nil) {
				t.Fatalf("err = %v, want %v mentioning %q", err, st.err, st.msg)
			}
			if !slices.Equal(written, st.written) || !slices.Equal(removed, st.removed) {
				t.Errorf("written %q removed %q, want %q and %q", written, removed, st.written, st.removed)
			}
			want := map[string]string{}
			for n, b := range st.want {
				want[n] = "-r-------- " + string(b)
			}
			got := ls()
			if len(got) != len(want) {
				t.Errorf("keys dir holds %d files, want %d", len(got), len(want))
			}
			for n, w := range want {
				if got[n] != w {
					t.Errorf("%s = %q, want %q", n, got[n], w)
				}
			}
		})
	}
}

func TestKeysCorruptState(t *testing.T) {
	dir := t.TempDir()
	in := &Installer{KeysDir: filepath.Join(dir, "keys")}
	if err := os.MkdirAll(in.KeysDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in.statePath(), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := in.Keys(map[string][]byte{"team-a.keys": ring(t, "a")}); !errors.Is(err, errdefs.ErrDataLoss) {
		t.Fatalf("err = %v, want DataLoss", err)
	}
	// a state file naming a path is not followed out of the keys dir
	outside := filepath.Join(dir, "victim")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in.statePath(), []byte(`{"rings": ["../victim", "team-a.keys"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, removed, err := in.Keys(map[string][]byte{}); err != nil || !slices.Equal(removed, []string{"team-a.keys"}) {
		t.Fatalf("removed %q, %v; want [team-a.keys]", removed, err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("a name from the state file reached outside the keys dir: %v", err)
	}
}

// TestRepairsModes: a policy or ring of the right content but a mode the
// shim refuses is written again.
func TestRepairsModes(t *testing.T) {
	dir := t.TempDir()
	in := &Installer{PolicyPath: filepath.Join(dir, "policy.toml"), KeysDir: filepath.Join(dir, "keys")}
	if _, err := in.Policy([]byte(goodPolicy)); err != nil {
		t.Fatal(err)
	}
	a := ring(t, "a")
	if _, _, err := in.Keys(map[string][]byte{"team-a.keys": a}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(in.PolicyPath, 0o666); err != nil {
		t.Fatal(err)
	}
	ringPath := filepath.Join(in.KeysDir, "team-a.keys")
	if err := os.Chmod(ringPath, 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := in.Policy([]byte(goodPolicy)); err != nil || !changed {
		t.Errorf("policy of mode 0666: changed %v, %v; want rewritten", changed, err)
	}
	if written, _, err := in.Keys(map[string][]byte{"team-a.keys": a}); err != nil || !slices.Equal(written, []string{"team-a.keys"}) {
		t.Errorf("ring of mode 0644: written %q, %v; want rewritten", written, err)
	}
	for p, want := range map[string]os.FileMode{in.PolicyPath: 0o644, ringPath: 0o400} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
		}
	}
}
