package keys

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/internal/atomicfile"
	"github.com/swift-rdma/swift-containerd/internal/trust"
)

// KeyLen is the length of every key, in bytes.
const KeyLen = 32

// MaxKeys bounds a ring (the zygote reads at most this many).
const MaxKeys = 8

// LocalID is the ID of a node-local key.
const LocalID = "local"

var idPattern = regexp.MustCompile(`^[a-z0-9-]{1,15}$`)

// Key is one key of a ring.
type Key struct {
	ID  string
	Key []byte
}

// Fingerprint identifies a key without revealing it: the first 16 hex
// digits of the SHA-256 of the key.
func (k Key) Fingerprint() string {
	s := sha256.Sum256(k.Key)
	return hex.EncodeToString(s[:8])
}

// Ring is a keyring, newest key first.
type Ring []Key

// ValidID tells whether id can name a key.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Parse reads a ring. name is used in errors (a path).
func Parse(name string, b []byte) (Ring, error) {
	var r Ring
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 4096), 4096)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.Fields(t)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"<id> <%d hex digits>\": %w", name, line, 2*KeyLen, errdefs.ErrInvalidArgument)
		}
		if !ValidID(f[0]) {
			return nil, fmt.Errorf("%s:%d: key id %q: want 1 to 15 of a-z, 0-9, '-': %w", name, line, f[0], errdefs.ErrInvalidArgument)
		}
		if seen[f[0]] {
			return nil, fmt.Errorf("%s:%d: key id %q given twice: %w", name, line, f[0], errdefs.ErrInvalidArgument)
		}
		k, err := hex.DecodeString(f[1])
		if err != nil || len(k) != KeyLen {
			return nil, fmt.Errorf("%s:%d: key %s: want %d hex digits: %w", name, line, f[0], 2*KeyLen, errdefs.ErrInvalidArgument)
		}
		seen[f[0]] = true
		r = append(r, Key{ID: f[0], Key: k})
		if len(r) > MaxKeys {
			return nil, fmt.Errorf("%s: more than %d keys: %w", name, MaxKeys, errdefs.ErrInvalidArgument)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v: %w", name, err, errdefs.ErrInvalidArgument)
	}
	if len(r) == 0 {
		return nil, fmt.Errorf("%s: no key: %w", name, errdefs.ErrInvalidArgument)
	}
	return r, nil
}

// Format writes a ring the way Parse reads it.
func (r Ring) Format() []byte {
	var b bytes.Buffer
	b.WriteString("# Swift tenant keyring: <id> <key>, newest (the one dialed with) first\n")
	for _, k := range r {
		fmt.Fprintf(&b, "%s %s\n", k.ID, hex.EncodeToString(k.Key))
	}
	return b.Bytes()
}

// PairKey is the key two zygotes of tenant, named a and b, prove the
// exchange with: HMAC-SHA-256 under the tenant key k of "swift-pair", then
// the tenant and the two names in byte order, each after a NUL (names and
// tenants hold no NUL: they are DNS labels, joined by dots). The shim
// hands each zygote only the pair keys of its own name and its peers'
// names (PairRing), never k: a zygote, or whoever reads its memory, speaks
// for no name but its own.
func PairKey(k []byte, tenant, a, b string) []byte {
	if b < a {
		a, b = b, a
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte("swift-pair\x00" + tenant + "\x00" + a + "\x00" + b))
	return m.Sum(nil)
}

// PairRing writes the ring a zygote of tenant named self proves with: for
// each of its peers each key of r as their pair key, newest first, "<id>
// <key> <peer>" per line, as swift-init reads it.
func (r Ring) PairRing(tenant, self string, peers []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Swift pair keys of zygote %s of tenant %s: <id> <key> <peer>, newest first\n", self, tenant)
	for _, p := range peers {
		for _, k := range r {
			fmt.Fprintf(&b, "%s %s %s\n", k.ID, hex.EncodeToString(PairKey(k.Key, tenant, self, p)), p)
		}
	}
	return b.Bytes()
}

// New returns a fresh random key. An empty id becomes the date and time.
func New(id string) (Key, error) {
	if id == "" {
		id = time.Now().UTC().Format("20060102-150405")
	}
	if !ValidID(id) {
		return Key{}, fmt.Errorf("key id %q: want 1 to 15 of a-z, 0-9, '-': %w", id, errdefs.ErrInvalidArgument)
	}
	k := make([]byte, KeyLen)
	if _, err := rand.Read(k); err != nil {
		return Key{}, err
	}
	return Key{ID: id, Key: k}, nil
}

// Rotate returns a ring with k first and at most keep keys.
func (r Ring) Rotate(k Key, keep int) (Ring, error) {
	if keep < 1 {
		return nil, fmt.Errorf("keep %d: want at least 1: %w", keep, errdefs.ErrInvalidArgument)
	}
	for _, o := range r {
		if o.ID == k.ID {
			return nil, fmt.Errorf("key id %q is in the ring already: %w", k.ID, errdefs.ErrInvalidArgument)
		}
	}
	out := append(Ring{k}, r...)
	if len(out) > keep {
		out = out[:keep]
	}
	return out, nil
}

// Mode is the file mode rings are written with.
const Mode = 0o400

// Read reads and parses a ring file. It must be a regular file that only
// its owner may read or write. Who owns it, and the directories above it,
// is not checked: Read is what `swiftctl keys` reads an operator's rings
// with, wherever they keep them. A ring fed to zygotes is read with
// ReadTrusted.
func Read(path string) (Ring, error) {
	return read(path, path)
}

// ReadTrusted is Read for a ring fed to zygotes, which accept every key
// in it: the ring, every directory above it and every link on the way
// must be root's and not writable by group or others (trust.Check; a
// sticky directory such as /tmp may be), so that nobody else can have
// written it or put a ring of their own in its place. An untrusted ring
// is a FailedPrecondition naming the entry at fault.
func ReadTrusted(path string) (Ring, error) {
	resolved, err := trust.Check(path)
	if err != nil {
		return nil, fmt.Errorf("keyring %s: %w", path, err)
	}
	return read(path, resolved)
}

// read reads the ring at path, named name in errors.
func read(name, path string) (Ring, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("keyring %s: not a regular file: %w", name, errdefs.ErrInvalidArgument)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("keyring %s: mode %04o lets others read or write it (want 0400 or 0600): %w",
			name, st.Mode().Perm(), errdefs.ErrInvalidArgument)
	}
	b := make([]byte, 4097)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return nil, fmt.Errorf("keyring %s: %w", name, err)
	}
	if n > 4096 {
		return nil, fmt.Errorf("keyring %s: larger than 4096 bytes: %w", name, errdefs.ErrInvalidArgument)
	}
	return Parse(name, b[:n])
}

// Write writes r to path atomically with mode Mode, synced to disk.
func Write(path string, r Ring) error {
	return atomicfile.Write(path, r.Format(), Mode)
}

// LocalRing returns the path of tenant's node-local ring under dir,
// creating it (one random key, id "local") the first time. Concurrent
// callers get the same ring.
func LocalRing(dir, tenant string) (string, error) {
	path := filepath.Join(dir, tenant+".keys")
	if _, err := os.Lstat(path); err == nil {
		// checked on use: a ring that is not a regular 0400/0600 file
		// of good keys, root's in root's directories, is a clear error,
		// not a silent zygote failure
		if _, err := ReadTrusted(path); err != nil {
			return "", fmt.Errorf("node-local keyring of tenant %s: %w (remove it to make a new one)", tenant, err)
		}
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("tenant key dir: %w", err)
	}
	k, err := New(LocalID)
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "."+tenant+".keys-*")
	if err != nil {
		return "", fmt.Errorf("tenant key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(Ring{k}.Format())
	if werr == nil {
		werr = tmp.Chmod(Mode)
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", fmt.Errorf("tenant key: %w", werr)
	}
	// Link, not rename: a concurrent shim that created the ring first wins.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("tenant key: %w", err)
	}
	return path, nil
}

// Provisioned finds tenant's provisioned ring: keyFile (a policy's
// key_file) when set, else keysDir/<tenant>.keys when it exists. found is
// false when there is none; a ring that exists but cannot be read or
// parsed, that others may read, or that is not root's in root's
// directories (ReadTrusted), is a FailedPrecondition naming it.
func Provisioned(keysDir, keyFile, tenant string) (path string, found bool, err error) {
	path = keyFile
	if path == "" {
		path = filepath.Join(keysDir, tenant+".keys")
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return "", false, nil
		}
	}
	if _, err := ReadTrusted(path); err != nil {
		if errdefs.IsFailedPrecondition(err) {
			return "", false, fmt.Errorf("tenant %s's keyring: %w", tenant, err)
		}
		return "", false, fmt.Errorf("tenant %s's keyring: %w: %w", tenant, err, errdefs.ErrFailedPrecondition)
	}
	return path, true, nil
}
