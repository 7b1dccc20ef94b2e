// Package nodeconf installs onto a Swift node the configuration an
// operator keeps in Kubernetes: the tenant policy (a ConfigMap's
// policy.toml) and the tenant keyrings (a Secret's <tenant>.keys). Each is
// validated as the shim will read it before it replaces anything, and
// written atomically with the mode and owner the shim requires, so a Create
// sees the old file or the new one, never a part or a bad one.
//
// Keyrings: the installer keeps the list of rings it manages (its state
// file, beside them in the keys directory) and removes those that leave
// the Secret. A ring it did not write is taken over only when it holds
// exactly the Secret's ring; a different one (provisioned by hand, a
// node-local ring) is left alone and named in an error.
package nodeconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/internal/atomicfile"
	"github.com/swift-rdma/swift-containerd/keys"
	"github.com/swift-rdma/swift-containerd/policy"
)

// PolicyKey is the ConfigMap key that holds the tenant policy.
const PolicyKey = "policy.toml"

// PolicyMode is the policy file's mode (root writes it, the shim and
// swiftctl read it).
const PolicyMode = 0o644

// maxRing is the largest ring the shim reads.
const maxRing = 4096

// maxPolicy bounds a policy (a ConfigMap holds at most 1 MiB).
const maxPolicy = 1 << 20

// Installer writes the policy to PolicyPath and keyrings into KeysDir,
// remembering the rings it manages in StateFile there. Its methods may be
// called from several goroutines.
type Installer struct {
	PolicyPath string
	KeysDir    string

	mu sync.Mutex
}

// StateFile is the installer's list of the rings it manages, in the keys
// directory (mode 0600; not a ring: the shim reads only <tenant>.keys).
const StateFile = ".swift-node-rings.json"

func (in *Installer) statePath() string { return filepath.Join(in.KeysDir, StateFile) }

// ours tells whether path is a regular file of root's (or this process's
// user's) with mode perm: what the shim trusts.
func ours(path string, perm os.FileMode) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != perm {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// Policy validates data as a tenant policy and, if it differs from the
// file, replaces the file. It tells whether it wrote. Invalid data is an
// InvalidArgument error naming its problems, and the file stays.
func (in *Installer) Policy(data []byte) (bool, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(data) > maxPolicy {
		return false, fmt.Errorf("tenant policy: %d bytes, more than %d: %w", len(data), maxPolicy, errdefs.ErrInvalidArgument)
	}
	if _, err := policy.Parse(PolicyKey, data); err != nil {
		return false, fmt.Errorf("not installing the tenant policy: %w", err)
	}
	if old, err := os.ReadFile(in.PolicyPath); err == nil && string(old) == string(data) && ours(in.PolicyPath, PolicyMode) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(in.PolicyPath), 0o755); err != nil {
		return false, fmt.Errorf("tenant policy: %w", err)
	}
	if err := atomicfile.Write(in.PolicyPath, data, PolicyMode); err != nil {
		return false, fmt.Errorf("tenant policy: %w", err)
	}
	return true, nil
}

// RingName tells whether name is a keyring file name the installer takes:
// <tenant>.keys with tenant a lowercase DNS label, as a tenant policy's
// tenant names are.
func RingName(name string) bool {
	t, ok := strings.CutSuffix(name, ".keys")
	return ok && annotations.IsLabel(t)
}

// Keys makes the rings the installer manages exactly files (name → ring):
// each is validated (its name by RingName, its content by keys.Parse) and
// a changed one replaced, mode 0400; one it managed before that is not in
// files is removed. Any invalid entry fails the whole update, naming it,
// and changes nothing. A ring it does not manage whose content differs is
// not replaced (an error names it); the others still are, and removals
// still happen. It returns the names written and removed.
func (in *Installer) Keys(files map[string][]byte) (written, removed []string, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var bad []error
	for _, n := range names {
		if !RingName(n) {
			bad = append(bad, fmt.Errorf("%q is not <tenant>.keys with a tenant name (a lowercase DNS label): %w", n, errdefs.ErrInvalidArgument))
			continue
		}
		if len(files[n]) > maxRing {
			bad = append(bad, fmt.Errorf("keyring %s: larger than %d bytes: %w", n, maxRing, errdefs.ErrInvalidArgument))
		} else if _, err := keys.Parse(n, files[n]); err != nil {
			bad = append(bad, err)
		}
	}
	if len(bad) > 0 {
		return nil, nil, fmt.Errorf("not installing the tenant keyrings: %w", errors.Join(bad...))
	}
	managed, err := in.managed()
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(in.KeysDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("keys dir: %w", err)
	}
	// which rings it manages from now on: the Secret's, except one of
	// somebody else's that differs
	var errs []error
	var take []string
	for _, n := range names {
		p := filepath.Join(in.KeysDir, n)
		old, err := os.ReadFile(p)
		if err == nil && !slices.Contains(managed, n) && string(old) != string(files[n]) {
			errs = append(errs, fmt.Errorf("keyring %s: another ring of that name, not installed by swift-node, is there: "+
				"not replacing it (remove it to let the Secret's in): %w", p, errdefs.ErrFailedPrecondition))
			continue
		}
		take = append(take, n)
	}
	// the state first: a crash between leaves a name listed whose file
	// is missing or old, which the next update corrects
	next := slices.Clone(take)
	for _, n := range managed {
		if _, ok := files[n]; !ok {
			next = append(next, n) // removed below, then forgotten
		}
	}
	sort.Strings(next)
	next = slices.Compact(next)
	if !slices.Equal(next, managed) {
		if err := in.saveManaged(next); err != nil {
			return nil, nil, err
		}
	}
	for _, n := range take {
		p := filepath.Join(in.KeysDir, n)
		if old, err := os.ReadFile(p); err == nil && string(old) == string(files[n]) && ours(p, keys.Mode) {
			continue
		}
		if err := atomicfile.Write(p, files[n], keys.Mode); err != nil {
			errs = append(errs, fmt.Errorf("keyring %s: %w", p, err))
			continue
		}
		written = append(written, n)
	}
	var kept []string
	for _, n := range managed {
		if _, ok := files[n]; ok {
			continue
		}
		if err := os.Remove(filepath.Join(in.KeysDir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("keyring %s: %w", filepath.Join(in.KeysDir, n), err))
			kept = append(kept, n) // still managed: removed at the next update
			continue
		}
		removed = append(removed, n)
	}
	if len(removed) > 0 {
		if err := atomicfile.SyncDir(in.KeysDir); err != nil {
			errs = append(errs, err)
		}
	}
	final := append(slices.Clone(take), kept...)
	sort.Strings(final)
	if !slices.Equal(final, next) {
		if err := in.saveManaged(final); err != nil {
			errs = append(errs, err)
		}
	}
	return written, removed, errors.Join(errs...)
}

// managed lists the rings the installer manages (none without a state
// file), sorted.
func (in *Installer) managed() ([]string, error) {
	b, err := os.ReadFile(in.statePath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st struct {
		Rings []string `json:"rings"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", in.statePath(), err, errdefs.ErrDataLoss)
	}
	// a name that is not a ring's (a state file edited by hand) is never
	// a path to remove
	names := slices.DeleteFunc(st.Rings, func(n string) bool { return !RingName(n) })
	sort.Strings(names)
	return slices.Compact(names), nil
}

func (in *Installer) saveManaged(names []string) error {
	b, err := json.Marshal(struct {
		Rings []string `json:"rings"`
	}{append([]string{}, names...)})
	if err != nil {
		return err
	}
	if err := atomicfile.Write(in.statePath(), b, 0o600); err != nil {
		return fmt.Errorf("keyring state: %w", err)
	}
	return nil
}
