package verbs

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/internal/atomicfile"
)

// Cache layout under the node's state directory:
//
//	state_dir/verbs/current                the name of the current cache directory
//	state_dir/verbs/<id>-<n>/manifest.json  fingerprint, providers, env, profile, file hashes
//	state_dir/verbs/<id>-<n>/snapshot.bin   what libswiftverbs.so serves (see snapshot.go)
//	state_dir/verbs/<id>-<n>/libswiftverbs.so
//	state_dir/verbs/<id>-<n>/env            tuning environment, KEY=VALUE lines
//	state_dir/verbs/<id>-<n>/libibverbs.d/  the needed providers' .driver files (trimmed mode)
//	state_dir/verbs/<id>-<n>/libibverbs-cached.d/  the same and swiftverbs.driver (cached mode)
//	state_dir/verbs/<id>-<n>/libswiftverbs-rdmavNN.so  links to libswiftverbs.so, one per provider ABI
//
// In cached mode libibverbs loads libswiftverbs.so as a provider: the
// entry swiftverbs.driver names ContainerDir/libswiftverbs, to which
// libibverbs adds its provider suffix "-rdmavNN.so" (NN: its private
// ABI). The links answer for every ABI from ProviderABIMin to
// ProviderABIMax, so that an image whose rdma-core differs from the
// node's finds the library too (it uses only libibverbs' public ABI).
//
// <id> is the fingerprint's ID. A rebuild writes a new directory and then
// switches current; older directories are left in place because running
// containers may have them mounted.
const (
	DirName         = "verbs"
	CurrentFile     = "current"
	ManifestFile    = "manifest.json"
	SnapshotFile    = "snapshot.bin"
	PreloadFile     = "libswiftverbs.so"
	EnvFile         = "env"
	ConfigDirName   = "libibverbs.d"
	CachedDirName   = "libibverbs-cached.d"
	EntryFile       = "swiftverbs.driver"
	EntryStem       = "libswiftverbs"
	ContainerDir    = "/.swift/verbs" // where containers see the cache
	ProviderABIMin  = 17
	ProviderABIMax  = 64
	ManifestVersion = 2
)

// The verbs modes a container can run in.
const (
	ModeCached  = "cached"  // trimmed providers, and libswiftverbs.so as a provider entry
	ModeTrimmed = "trimmed" // trimmed providers only
	ModeStock   = "stock"   // the image as it is
)

// ProviderLink is the name libibverbs of provider ABI abi opens for the
// entry ContainerDir/libswiftverbs.
func ProviderLink(abi int) string { return fmt.Sprintf("%s-rdmav%d.so", EntryStem, abi) }

// EntryData is the content of a libibverbs.d entry that makes libibverbs
// load the cache's library from dir.
func EntryData(dir string) []byte {
	return []byte("driver " + filepath.Join(dir, EntryStem) + "\n")
}

// Provider is the provider a device needs.
type Provider struct {
	Device  string `json:"device"`
	Name    string `json:"name"`    // e.g. rxe
	Library string `json:"library"` // the shared object the profile saw
}

// ProfileSummary is what the profiler measured when the cache was built.
type ProfileSummary struct {
	Runs       int                `json:"runs"`
	Device     string             `json:"device"`
	StockUS    map[string]float64 `json:"stock_us"`             // median per call, critical, process, init
	CachedUS   map[string]float64 `json:"cached_us,omitempty"`  // same, through the cache
	Speedup    float64            `json:"speedup,omitempty"`    // stock critical / cached critical
	TrimmedUS  map[string]float64 `json:"trimmed_us,omitempty"` // same, trimmed providers only
	CachedNote string             `json:"cached_note,omitempty"`
	// DefaultMode is the mode containers that do not ask for one get:
	// the faster of cached and trimmed as measured here (trimmed when not
	// measured), and DefaultWhy says why, with the figures.
	DefaultMode string `json:"default_mode"`
	DefaultWhy  string `json:"default_why"`
}

// DeviceStability says which of a device's results were identical over
// every profiling run (only those are served).
type DeviceStability struct {
	Device      string `json:"device"`
	AttrStable  bool   `json:"attr_stable"`
	AttrLen     int    `json:"attr_len"`
	Ports       int    `json:"ports"`
	PortsStable int    `json:"ports_stable"`
}

// Manifest describes a cache directory.
type Manifest struct {
	Version      int               `json:"version"`
	ID           string            `json:"id"`
	Built        time.Time         `json:"built"`
	Fingerprint  Fingerprint       `json:"fingerprint"`
	Providers    []Provider        `json:"providers"`
	DriverFiles  []string          `json:"driver_files"`  // files in libibverbs.d
	StockDrivers []string          `json:"stock_drivers"` // every provider the node's config names
	Env          map[string]string `json:"env"`
	EnvReasons   []string          `json:"env_reasons,omitempty"`
	CopyOnFork   *bool             `json:"copy_on_fork,omitempty"`
	NetnsMode    string            `json:"netns_mode,omitempty"`
	Stability    []DeviceStability `json:"stability"`
	Profile      ProfileSummary    `json:"profile"`
	// Files maps each file (relative to the cache directory) to its sha256.
	Files map[string]string `json:"files"`
}

// Contents is what Write stores.
type Contents struct {
	Manifest Manifest // Files is filled in by Write
	Snapshot Snapshot
	Preload  []byte
	Drivers  []DriverFile
}

// Root is state_dir/verbs.
func Root(stateDir string) string { return filepath.Join(stateDir, DirName) }

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// RenderEnv writes env as sorted KEY=VALUE lines.
func RenderEnv(env map[string]string) []byte {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, env[k])
	}
	return b.Bytes()
}

// ParseEnv reads KEY=VALUE lines (blank lines and # comments allowed).
func ParseEnv(b []byte) (map[string]string, error) {
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("env line %d: %q is not KEY=VALUE: %w", n, l, errdefs.ErrDataLoss)
		}
		env[k] = v
	}
	return env, nil
}

func writeFileSync(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Write stores c as a new cache directory under stateDir/verbs and returns
// its path. It does not make it current (see SetCurrent), so a caller can
// still measure or discard it.
func Write(stateDir string, c Contents) (dir string, retErr error) {
	root := Root(stateDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", root, err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		return "", fmt.Errorf("verbs cache: %w", err)
	}
	if len(c.Drivers) == 0 {
		return "", fmt.Errorf("verbs cache: no provider .driver file to write: %w", errdefs.ErrInvalidArgument)
	}
	if len(c.Preload) < 4 || string(c.Preload[:4]) != "\x7fELF" {
		return "", fmt.Errorf("verbs cache: %s is not an ELF file: %w", PreloadFile, errdefs.ErrInvalidArgument)
	}
	snap, err := c.Snapshot.MarshalBinary()
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, ".build-")
	if err != nil {
		return "", fmt.Errorf("verbs cache: %w", err)
	}
	defer func() {
		if retErr != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	m := c.Manifest
	if m.Profile.DefaultMode == "" {
		m.Profile.DefaultMode, m.Profile.DefaultWhy = DefaultMode(0, 0)
	}
	m.Version = ManifestVersion
	m.ID = m.Fingerprint.ID()
	m.Files = map[string]string{}
	m.DriverFiles = nil
	type file struct {
		name string
		data []byte
		mode os.FileMode
	}
	files := []file{
		{SnapshotFile, snap, 0o644},
		{PreloadFile, c.Preload, 0o755},
		{EnvFile, RenderEnv(m.Env), 0o644},
	}
	for _, d := range c.Drivers {
		if d.Name == "" || strings.ContainsAny(d.Name, "/") || strings.HasPrefix(d.Name, ".") || d.Name == EntryFile {
			return "", fmt.Errorf("verbs cache: bad driver file name %q: %w", d.Name, errdefs.ErrInvalidArgument)
		}
		for _, dir := range []string{ConfigDirName, CachedDirName} {
			files = append(files, file{dir + "/" + d.Name, d.Data, 0o644})
		}
		m.DriverFiles = append(m.DriverFiles, d.Name)
	}
	files = append(files, file{CachedDirName + "/" + EntryFile, EntryData(ContainerDir), 0o644})
	for _, dir := range []string{ConfigDirName, CachedDirName} {
		if err := os.Mkdir(filepath.Join(tmp, dir), 0o755); err != nil {
			return "", err
		}
		if err := os.Chmod(filepath.Join(tmp, dir), 0o755); err != nil {
			return "", err
		}
	}
	for abi := ProviderABIMin; abi <= ProviderABIMax; abi++ {
		if err := os.Symlink(PreloadFile, filepath.Join(tmp, ProviderLink(abi))); err != nil {
			return "", fmt.Errorf("verbs cache: %w", err)
		}
	}
	for _, f := range files {
		if err := writeFileSync(filepath.Join(tmp, f.name), f.data, f.mode); err != nil {
			return "", fmt.Errorf("verbs cache: write %s: %w", f.name, err)
		}
		m.Files[f.name] = sha(f.data)
	}
	if err := writeManifest(tmp, m); err != nil {
		return "", err
	}
	for _, dir := range []string{ConfigDirName, CachedDirName} {
		if err := syncDir(filepath.Join(tmp, dir)); err != nil {
			return "", err
		}
	}
	if err := syncDir(tmp); err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s-%s", m.ID, strconv.FormatInt(time.Now().UnixNano(), 36))
	dir = filepath.Join(root, name)
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("verbs cache: %w", err)
	}
	return dir, syncDir(root)
}

func writeManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, ManifestFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("verbs cache: %w", err)
	}
	return nil
}

// UpdateManifest rewrites dir's manifest (for example with the cached
// path's measurements), keeping what Write derived: the file hashes, the
// driver file list, the version and the ID.
func UpdateManifest(dir string, m Manifest) error {
	old, err := readManifest(dir)
	if err != nil {
		return err
	}
	m.Files, m.Version, m.ID, m.DriverFiles = old.Files, old.Version, old.ID, old.DriverFiles
	return writeManifest(dir, m)
}

// SetCurrent makes dir (a directory Write returned) the node's cache.
func SetCurrent(stateDir, dir string) error {
	root := Root(stateDir)
	if filepath.Dir(dir) != filepath.Clean(root) {
		return fmt.Errorf("verbs cache: %s is not under %s: %w", dir, root, errdefs.ErrInvalidArgument)
	}
	if err := atomicfile.Write(filepath.Join(root, CurrentFile), []byte(filepath.Base(dir)+"\n"), 0o644); err != nil {
		return fmt.Errorf("verbs cache: %w", err)
	}
	return nil
}

// State is a cache's verdict.
type State string

// The states Check returns.
const (
	StateValid   State = "valid"   // matches the node: containers may use it
	StateStale   State = "stale"   // built for a node that differs from this one now
	StateMissing State = "missing" // never built
	StateInvalid State = "invalid" // corrupt, truncated, unsafe, or cannot be checked
)

// Result is what Check found.
type Result struct {
	State    State
	Reasons  []string
	Dir      string    // the current cache directory, when there is one
	Manifest *Manifest // when it could be read
}

// Valid reports whether containers may use the cache.
func (r Result) Valid() bool { return r.State == StateValid }

// Why joins the reasons.
func (r Result) Why() string { return strings.Join(r.Reasons, "; ") }

// Node says where Check looks.
type Node struct {
	StateDir string
	Sources
}

// Current returns the current cache directory, or an ErrNotFound error.
func Current(stateDir string) (string, error) {
	root := Root(stateDir)
	b, err := os.ReadFile(filepath.Join(root, CurrentFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no verbs cache under %s (run swiftctl cache build): %w", root, errdefs.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", filepath.Join(root, CurrentFile), err)
	}
	name := strings.TrimSpace(string(b))
	if name == "" || strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("%s names no cache directory (%q): %w", filepath.Join(root, CurrentFile), name, errdefs.ErrDataLoss)
	}
	return filepath.Join(root, name), nil
}

func readManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return m, fmt.Errorf("read manifest: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("manifest %s: %v: %w", filepath.Join(dir, ManifestFile), err, errdefs.ErrDataLoss)
	}
	if m.Version != ManifestVersion {
		return m, fmt.Errorf("manifest version %d, want %d: %w", m.Version, ManifestVersion, errdefs.ErrDataLoss)
	}
	return m, nil
}

// checkOwner refuses files a non-root user could have written: the
// library runs in every verbs process of a cached container.
func checkOwner(path string) error {
	st, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: %w", path, errdefs.ErrPermissionDenied)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (%v): %w", path, st.Mode().Perm(), errdefs.ErrPermissionDenied)
	}
	if uid, ok := fileUID(st); ok && uid != 0 && uid != uint32(os.Geteuid()) {
		return fmt.Errorf("%s is owned by uid %d: %w", path, uid, errdefs.ErrPermissionDenied)
	}
	return nil
}

func fileUID(st os.FileInfo) (uint32, bool) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Uid, true
	}
	return 0, false
}

// Load reads and verifies the cache in dir: manifest, every file's hash,
// the snapshot's own checks, the env file, and ownership and modes.
func Load(dir string) (Manifest, Snapshot, error) {
	m, err := readManifest(dir)
	if err != nil {
		return m, Snapshot{}, err
	}
	if m.ID != m.Fingerprint.ID() {
		return m, Snapshot{}, fmt.Errorf("manifest id %s does not match its fingerprint (%s): %w", m.ID, m.Fingerprint.ID(), errdefs.ErrDataLoss)
	}
	for _, p := range []string{filepath.Dir(dir), dir, filepath.Join(dir, ConfigDirName), filepath.Join(dir, CachedDirName), filepath.Join(dir, ManifestFile)} {
		if err := checkOwner(p); err != nil {
			return m, Snapshot{}, err
		}
	}
	for _, need := range []string{SnapshotFile, PreloadFile, EnvFile} {
		if _, ok := m.Files[need]; !ok {
			return m, Snapshot{}, fmt.Errorf("manifest lists no %s: %w", need, errdefs.ErrDataLoss)
		}
	}
	if len(m.DriverFiles) == 0 {
		return m, Snapshot{}, fmt.Errorf("manifest lists no provider .driver file: %w", errdefs.ErrDataLoss)
	}
	for _, cd := range []struct {
		name string
		want int
	}{{ConfigDirName, len(m.DriverFiles)}, {CachedDirName, len(m.DriverFiles) + 1}} {
		entries, err := os.ReadDir(filepath.Join(dir, cd.name))
		if err != nil {
			return m, Snapshot{}, fmt.Errorf("read %s: %w", cd.name, err)
		}
		if len(entries) != cd.want {
			return m, Snapshot{}, fmt.Errorf("%s holds %d files, the manifest says %d: %w", cd.name, len(entries), cd.want, errdefs.ErrDataLoss)
		}
	}
	if got := m.Files[CachedDirName+"/"+EntryFile]; got != sha(EntryData(ContainerDir)) {
		return m, Snapshot{}, fmt.Errorf("manifest has no hash of %s/%s naming %s: %w", CachedDirName, EntryFile, ContainerDir, errdefs.ErrDataLoss)
	}
	for abi := ProviderABIMin; abi <= ProviderABIMax; abi++ {
		l := filepath.Join(dir, ProviderLink(abi))
		if t, err := os.Readlink(l); err != nil || t != PreloadFile {
			return m, Snapshot{}, fmt.Errorf("%s is not a link to %s (%q, %v): %w", ProviderLink(abi), PreloadFile, t, err, errdefs.ErrDataLoss)
		}
	}
	var snapBytes, envBytes []byte
	names := make([]string, 0, len(m.Files))
	for name := range m.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.Contains(name, "..") || filepath.IsAbs(name) {
			return m, Snapshot{}, fmt.Errorf("manifest names file %q: %w", name, errdefs.ErrDataLoss)
		}
		p := filepath.Join(dir, name)
		if err := checkOwner(p); err != nil {
			return m, Snapshot{}, err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return m, Snapshot{}, fmt.Errorf("read %s: %w", name, err)
		}
		if sha(b) != m.Files[name] {
			return m, Snapshot{}, fmt.Errorf("%s does not match the manifest (%d bytes; truncated or modified): %w", name, len(b), errdefs.ErrDataLoss)
		}
		switch name {
		case SnapshotFile:
			snapBytes = b
		case EnvFile:
			envBytes = b
		case PreloadFile:
			if len(b) < 4 || string(b[:4]) != "\x7fELF" {
				return m, Snapshot{}, fmt.Errorf("%s is not an ELF file: %w", name, errdefs.ErrDataLoss)
			}
		}
	}
	for _, d := range m.DriverFiles {
		for _, cd := range []string{ConfigDirName, CachedDirName} {
			if _, ok := m.Files[cd+"/"+d]; !ok {
				return m, Snapshot{}, fmt.Errorf("manifest has no hash for %s/%s: %w", cd, d, errdefs.ErrDataLoss)
			}
		}
	}
	switch m.Profile.DefaultMode {
	case ModeCached, ModeTrimmed:
	default:
		return m, Snapshot{}, fmt.Errorf("manifest's default mode %q is neither %s nor %s: %w", m.Profile.DefaultMode, ModeCached, ModeTrimmed, errdefs.ErrDataLoss)
	}
	snap, err := ParseSnapshot(snapBytes)
	if err != nil {
		return m, snap, err
	}
	env, err := ParseEnv(envBytes)
	if err != nil {
		return m, snap, err
	}
	if !maps.Equal(env, m.Env) {
		return m, snap, fmt.Errorf("env file does not match the manifest: %w", errdefs.ErrDataLoss)
	}
	if len(snap.Devices) != len(m.Fingerprint.Devices) || snap.Kernel != m.Fingerprint.Kernel {
		return m, snap, fmt.Errorf("snapshot and manifest describe different nodes: %w", errdefs.ErrDataLoss)
	}
	return m, snap, nil
}

// Check says whether the node's current cache may be used: present,
// intact, and built for the node as it is now. It never fails: every
// problem is a non-valid Result with reasons.
func Check(n Node) Result {
	dir, err := Current(n.StateDir)
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			return Result{State: StateMissing, Reasons: []string{"no verbs cache built on this node (swiftctl cache build)"}}
		}
		return Result{State: StateInvalid, Reasons: []string{err.Error()}}
	}
	r := Result{Dir: dir}
	m, _, err := Load(dir)
	if err != nil {
		r.State, r.Reasons = StateInvalid, []string{fmt.Sprintf("cache %s: %v", filepath.Base(dir), err)}
		return r
	}
	r.Manifest = &m
	live, err := Collect(n.Sources)
	if err != nil {
		r.State, r.Reasons = StateInvalid, []string{fmt.Sprintf("cannot fingerprint the node: %v", err)}
		return r
	}
	if d := Diff(m.Fingerprint, live); len(d) > 0 {
		r.State, r.Reasons = StateStale, d
		return r
	}
	r.State = StateValid
	return r
}
