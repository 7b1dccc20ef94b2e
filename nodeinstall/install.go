package nodeinstall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/install"
)

// hostPATH is the PATH of commands run in the node's root.
const hostPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// maxFile bounds a file the installer reads from the node.
const maxFile = 256 << 20

// ManifestName is the manifest's file name in the state directory.
const ManifestName = "manifest.json"

// Binaries are the programs installed into PREFIX/bin; everything under
// lib/swift is installed too.
var Binaries = []string{"containerd-shim-swift-v2", "swift-hook", "swiftctl"}

// Config says what the installer installs and where. Paths other than
// HostRoot and From are the node's.
type Config struct {
	// HostRoot is the node's root directory as this process sees it: "/"
	// on the node itself, /proc/1/root in a hostPID pod.
	HostRoot string
	// From is this process's prefix holding bin/ and lib/swift (the
	// image's /usr/local).
	From string
	// Prefix is where they go on the node (PREFIX/bin, PREFIX/lib/swift).
	Prefix string
	// StateDir holds the manifest and the files set aside.
	StateDir string
	// Containerd selects containerd's config and the runtime entry; its
	// Shim is PREFIX/bin/containerd-shim-swift-v2.
	Containerd install.Options
	// Restart is the node's command that restarts containerd, run in the
	// node's root when containerd's config changed; empty: none (the
	// operator restarts it).
	Restart []string
	// RestartTimeout bounds it (default 2 minutes).
	RestartTimeout time.Duration
	// WaitFor are node files that must exist before the node is labelled
	// (the node config the runtime entry names).
	WaitFor []string
	// Label labels the node; nil: no label.
	Label Labeler
	// Owner names who installs (the chart's release: NAMESPACE/DAEMONSET);
	// an install of another owner on the node is refused, not undone.
	Owner string
}

// Labeler sets and reads the node's labels.
type Labeler interface {
	// Key is the label's key, Value the value install sets.
	Key() string
	Value() string
	// Get returns the node's value of label key (ok false: unset).
	Get(ctx context.Context, key string) (value string, ok bool, err error)
	// Set sets label key to *value, or removes it when value is nil.
	Set(ctx context.Context, key string, value *string) error
}

// Manifest is what install did on the node.
type Manifest struct {
	Prefix string `json:"prefix"`
	// Owner is Config.Owner of the install.
	Owner string `json:"owner,omitempty"`
	// RestartPending: containerd's config changed and containerd has not
	// been restarted since (the next run restarts it).
	RestartPending bool `json:"restart_pending,omitempty"`
	// Files are those install wrote, with their digests.
	Files []File `json:"files"`
	// Dirs are the directories install made, outermost first.
	Dirs []string `json:"dirs"`
	// Containerd is containerd's config as install changed it (nil: it
	// changed nothing there).
	Containerd *Containerd `json:"containerd,omitempty"`
	// Label is the label install set (nil: none).
	Label *Label `json:"label,omitempty"`
}

// File is a file install wrote.
type File struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	// Prev is the digest of install's earlier release of the file (an
	// upgrade stopped between recording the new digest and writing).
	Prev string `json:"prev,omitempty"`
	// Aside is where a different file that was there before was set
	// aside ("": none was): asidePath(Path), beside it.
	Aside string `json:"aside,omitempty"`
}

// asidePath is where the node's own file at p waits while Swift's is
// there: beside it (a rename never crosses file systems).
func asidePath(p string) string {
	return filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".swift-aside")
}

// ours tells whether digest cur is one install wrote at f.
func (f File) ours(cur string) bool { return cur != "" && (cur == f.SHA256 || cur == f.Prev) }

// Containerd is the runtime entry install added.
type Containerd struct {
	Config  string      `json:"config"`
	Runtime string      `json:"runtime"`
	Files   []SavedFile `json:"files"`
	// MadeDir is the drop-in directory install made ("": it was there).
	MadeDir string `json:"made_dir,omitempty"`
}

// SavedFile is one of containerd's config files as it was before install
// and its digest after.
type SavedFile struct {
	Path    string      `json:"path"`
	Existed bool        `json:"existed"`
	Before  []byte      `json:"before,omitempty"`
	Mode    fs.FileMode `json:"mode,omitempty"`
	After   string      `json:"after"` // sha256; "" when install removed it
}

// Label is the node label install set.
type Label struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Previous is the value before (nil: it was unset).
	Previous *string `json:"previous"`
}

// Result says what a run changed.
type Result struct {
	FilesWritten, FilesRemoved int
	ContainerdChanged          bool
	Restarted                  bool
	Labelled                   bool
}

// Installer installs and uninstalls with a Config.
type Installer struct {
	c Config
	h *host
	m Manifest
}

// New checks c and opens the node's root.
func New(c Config) (*Installer, error) {
	if c.HostRoot == "" {
		c.HostRoot = "/"
	}
	if c.RestartTimeout == 0 {
		c.RestartTimeout = 2 * time.Minute
	}
	for k, p := range map[string]string{"prefix": c.Prefix, "state dir": c.StateDir, "containerd config": c.Containerd.ConfigPath} {
		if _, err := rel(p); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	for _, p := range c.WaitFor {
		if _, err := rel(p); err != nil {
			return nil, fmt.Errorf("wait for: %w", err)
		}
	}
	if c.Containerd.RuntimeName == "" {
		c.Containerd.RuntimeName = install.DefaultRuntimeName
	}
	if err := install.ValidateRuntimeName(c.Containerd.RuntimeName); err != nil {
		return nil, err
	}
	if c.Prefix == c.StateDir || strings.HasPrefix(c.StateDir+"/", c.Prefix+"/lib/swift/") {
		return nil, fmt.Errorf("state dir %s: must not be inside what install writes (%s): %w", c.StateDir, c.Prefix, errdefs.ErrInvalidArgument)
	}
	c.Containerd.Shim = filepath.Join(c.Prefix, "bin", "containerd-shim-swift-v2")
	h, err := openHost(c.HostRoot)
	if err != nil {
		return nil, err
	}
	// a restart command that is not there is said before anything changes
	if len(c.Restart) > 0 {
		if _, err := h.lookPath(c.Restart[0]); err != nil {
			h.Close()
			return nil, fmt.Errorf("restart command: %w", err)
		}
	}
	return &Installer{c: c, h: h}, nil
}

// Close releases the node's root.
func (in *Installer) Close() error { return in.h.Close() }

func (in *Installer) manifestPath() string { return filepath.Join(in.c.StateDir, ManifestName) }

// open checks and locks the state directory and loads the manifest.
func (in *Installer) open(ctx context.Context) (func(), error) {
	if err := in.h.checkRootOnly(in.c.StateDir); err != nil {
		return nil, err
	}
	unlock, err := in.h.lock(ctx, in.c.StateDir)
	if err != nil {
		return nil, err
	}
	if err := in.load(); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// Manifest returns what install did, as recorded.
func (in *Installer) Manifest() Manifest { return in.m }

func (in *Installer) load() error {
	b, err := in.h.read(in.manifestPath(), 64<<20)
	if err != nil {
		return err
	}
	in.m = Manifest{}
	if b == nil {
		return nil
	}
	if err := json.Unmarshal(b, &in.m); err != nil {
		return fmt.Errorf("manifest %s: %v: %w", in.manifestPath(), err, errdefs.ErrDataLoss)
	}
	if err := in.check(); err != nil {
		return fmt.Errorf("manifest %s: %w: remove what it lists by hand", in.manifestPath(), err)
	}
	return nil
}

// check refuses a manifest that names anything install does not write:
// files outside the prefix, set-aside files elsewhere than beside them,
// containerd files other than the root config and the entry's drop-in,
// directories off the way to what install writes.
func (in *Installer) check() error {
	m := &in.m
	bad := func(what, p string) error {
		return fmt.Errorf("it names %s %q, which install does not write: %w", what, p, errdefs.ErrDataLoss)
	}
	under := func(p, dir string) bool {
		return filepath.IsAbs(p) && filepath.Clean(p) == p && strings.HasPrefix(p, dir+"/")
	}
	if m.Prefix != "" && (!filepath.IsAbs(m.Prefix) || filepath.Clean(m.Prefix) != m.Prefix) {
		return bad("the prefix", m.Prefix)
	}
	for _, f := range m.Files {
		if !under(f.Path, filepath.Join(m.Prefix, "bin")) && !under(f.Path, filepath.Join(m.Prefix, "lib", "swift")) {
			return bad("the file", f.Path)
		}
		if f.Aside != "" && f.Aside != asidePath(f.Path) {
			return bad("the set-aside file", f.Aside)
		}
	}
	for _, d := range m.Dirs {
		ok := filepath.IsAbs(d) && filepath.Clean(d) == d && (d == in.c.StateDir || strings.HasPrefix(in.c.StateDir, d+"/") ||
			d == m.Prefix || strings.HasPrefix(m.Prefix, d+"/") || under(d, m.Prefix))
		if !ok {
			return bad("the directory", d)
		}
	}
	if c := m.Containerd; c != nil {
		if install.ValidateRuntimeName(c.Runtime) != nil {
			return bad("the runtime", c.Runtime)
		}
		for _, f := range c.Files {
			if f.Path != c.Config && (filepath.Clean(f.Path) != f.Path || !filepath.IsAbs(f.Path) || filepath.Base(f.Path) != c.Runtime+".toml") {
				return bad("the containerd config file", f.Path)
			}
		}
		if c.MadeDir != "" && !slices.ContainsFunc(c.Files, func(f SavedFile) bool { return filepath.Dir(f.Path) == c.MadeDir && f.Path != c.Config }) {
			return bad("the drop-in directory", c.MadeDir)
		}
	}
	return nil
}

func (in *Installer) save() error {
	b, err := json.MarshalIndent(in.m, "", "  ")
	if err != nil {
		return err
	}
	return in.h.write(in.manifestPath(), append(b, '\n'), 0o600)
}

// mkdirAll makes directory p on the node and records those it made.
func (in *Installer) mkdirAll(p string) error {
	made, err := in.h.mkdirAll(p)
	in.addDirs(made)
	return err
}

// addDirs records directories install made.
func (in *Installer) addDirs(made []string) {
	for _, d := range made {
		if !slices.Contains(in.m.Dirs, d) {
			in.m.Dirs = append(in.m.Dirs, d)
		}
	}
}

// sources lists the files to install, as paths under From.
func (in *Installer) sources() ([]string, error) {
	var out []string
	for _, b := range Binaries {
		out = append(out, filepath.Join("bin", b))
	}
	lib := filepath.Join(in.c.From, "lib", "swift")
	err := filepath.WalkDir(lib, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			r, _ := filepath.Rel(in.c.From, p)
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("the image's files: %w", err)
	}
	return out, nil
}

// Install installs Swift onto the node, as the package comment says.
func (in *Installer) Install(ctx context.Context) (Result, error) {
	var res Result
	made, err := in.h.mkdirAll(in.c.StateDir)
	if err != nil {
		return res, err
	}
	unlock, err := in.open(ctx)
	if err != nil {
		return res, err
	}
	defer unlock()
	if in.m.Prefix != "" && in.m.Prefix != in.c.Prefix {
		return res, fmt.Errorf("this node has Swift installed into %s (manifest %s): uninstall it first to install into %s: %w",
			in.m.Prefix, in.manifestPath(), in.c.Prefix, errdefs.ErrFailedPrecondition)
	}
	if in.m.Owner != "" && in.m.Owner != in.c.Owner {
		return res, fmt.Errorf("this node has Swift installed by %s (manifest %s), not %s: uninstall that first: %w",
			in.m.Owner, in.manifestPath(), in.c.Owner, errdefs.ErrAlreadyExists)
	}
	in.m.Prefix, in.m.Owner = in.c.Prefix, in.c.Owner
	in.addDirs(made)
	if err := in.save(); err != nil {
		return res, err
	}
	if err := in.installFiles(ctx, &res); err != nil {
		return res, err
	}
	if err := in.installContainerd(ctx, &res); err != nil {
		return res, err
	}
	// also a restart an earlier run changed the config for but did not do
	if in.m.RestartPending {
		if err := in.restart(ctx); err != nil {
			return res, err
		}
		res.Restarted = len(in.c.Restart) > 0
	}
	if err := in.waitFor(ctx); err != nil {
		return res, err
	}
	if err := in.label(ctx, &res); err != nil {
		return res, err
	}
	return res, nil
}

func (in *Installer) installFiles(ctx context.Context, res *Result) error {
	srcs, err := in.sources()
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, r := range srcs {
		dst := filepath.Join(in.c.Prefix, r)
		want[dst] = true
		n, err := in.installFile(ctx, r, dst)
		if err != nil {
			return err
		}
		res.FilesWritten += n
	}
	// files of an earlier release that this one no longer has
	kept := in.m.Files[:0]
	for _, f := range in.m.Files {
		if want[f.Path] {
			kept = append(kept, f)
			continue
		}
		if removed, err := in.removeFile(ctx, f); err != nil {
			return err
		} else if removed {
			res.FilesRemoved++
		}
	}
	in.m.Files = kept
	if err := in.save(); err != nil {
		return err
	}
	log.G(ctx).Infof("install: %d files written into %s (%d already there)", res.FilesWritten, in.c.Prefix, len(srcs)-res.FilesWritten)
	return nil
}

// installFile puts the image's file r at dst (1: written, 0: it was there).
func (in *Installer) installFile(ctx context.Context, r, dst string) (int, error) {
	src, err := os.Open(filepath.Join(in.c.From, r))
	if err != nil {
		return 0, fmt.Errorf("the image's %s: %w", r, err)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("the image's %s is not a regular file (%v): %w", r, fi.Mode().Type(), errdefs.ErrFailedPrecondition)
	}
	sum, err := hashFile(src)
	if err != nil {
		return 0, err
	}
	cur, err := in.h.sum(dst)
	if err != nil {
		return 0, err
	}
	i := slices.IndexFunc(in.m.Files, func(f File) bool { return f.Path == dst })
	if cur == sum {
		return 0, nil
	}
	if err := in.mkdirAll(filepath.Dir(dst)); err != nil {
		return 0, err
	}
	if i < 0 {
		in.m.Files = append(in.m.Files, File{Path: dst})
		i = len(in.m.Files) - 1
	}
	f := &in.m.Files[i]
	switch {
	case cur == "" || f.ours(cur):
	case f.Aside != "":
		// the node's own file waits aside already: this one is a change
		// of Swift's file since, replaced
		log.G(ctx).Warnf("install: %s changed since install: replaced", dst)
	default:
		// the node's own file: set aside beside it, put back on uninstall
		aside := asidePath(dst)
		if a, err := in.h.sum(aside); err != nil || a != "" {
			return 0, fmt.Errorf("set %s aside: %s is there already (%v): %w", dst, aside, err, errdefs.ErrAlreadyExists)
		}
		f.Aside = aside
		if err := in.save(); err != nil {
			return 0, err
		}
		if err := in.h.rename(dst, aside); err != nil {
			return 0, err
		}
		log.G(ctx).Warnf("install: %s was there and differs from Swift's: set aside to %s (put back on uninstall)", dst, aside)
	}
	// recorded before it is written: a stop between leaves a file
	// uninstall and the next install recognise (Prev: the earlier release)
	if f.SHA256 != sum {
		if f.SHA256 != "" && f.ours(cur) {
			f.Prev = f.SHA256
		}
		f.SHA256 = sum
	}
	if err := in.save(); err != nil {
		return 0, err
	}
	if err := in.h.writeFrom(dst, io.NewSectionReader(src, 0, fi.Size()), fi.Mode().Perm()); err != nil {
		return 0, err
	}
	f.Prev = ""
	return 1, nil
}

// swiftctl runs the node's swiftctl (PREFIX/bin) in the node's root with
// -o json and returns its report.
func (in *Installer) swiftctl(ctx context.Context, args ...string) (install.Report, error) {
	var r install.Report
	out, err := in.runOnNode(ctx, time.Minute, append([]string{filepath.Join(in.c.Prefix, "bin", "swiftctl")}, append(args, "-o", "json")...))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return r, fmt.Errorf("swiftctl %s: its report: %v: %s", strings.Join(args, " "), err, out)
	}
	return r, nil
}

func (in *Installer) installArgs() []string {
	o := in.c.Containerd
	args := []string{"install", "containerd", "--config", o.ConfigPath, "--runtime-name", o.RuntimeName, "--shim", o.Shim}
	if o.SwiftConfig != "" {
		args = append(args, "--swift-config", o.SwiftConfig)
	}
	if o.BinaryName != "" {
		args = append(args, "--runc", o.BinaryName)
	}
	if o.SystemdCgroup {
		args = append(args, "--systemd-cgroup")
	}
	if o.CNIConfDir != "" {
		args = append(args, "--cni-conf-dir", o.CNIConfDir)
	}
	if o.Version != 0 {
		args = append(args, "--version", strconv.Itoa(o.Version))
	}
	return args
}

func (in *Installer) installContainerd(ctx context.Context, res *Result) error {
	o := in.c.Containerd
	if c := in.m.Containerd; c != nil && (c.Config != o.ConfigPath || c.Runtime != o.RuntimeName) {
		return fmt.Errorf("this node has the runtime entry %q installed into %s: uninstall first to install %q into %s: %w",
			c.Runtime, c.Config, o.RuntimeName, o.ConfigPath, errdefs.ErrFailedPrecondition)
	}
	args := in.installArgs()
	plan, err := in.swiftctl(ctx, append(args, "--dry-run")...)
	if err != nil {
		return err
	}
	for _, n := range plan.Notes {
		log.G(ctx).Infof("install containerd: %s", n)
	}
	if !plan.Changed {
		log.G(ctx).Infof("install: runtime %q is in %s already (%s)", o.RuntimeName, o.ConfigPath, plan.DropIn)
		return nil
	}
	if in.m.Containerd == nil {
		in.m.Containerd = &Containerd{Config: o.ConfigPath, Runtime: o.RuntimeName}
	}
	// each file as it was, unless an earlier install of ours saved it
	for _, ch := range plan.Changes {
		if slices.ContainsFunc(in.m.Containerd.Files, func(s SavedFile) bool { return s.Path == ch.Path }) {
			continue
		}
		b, mode, err := in.h.readMode(ch.Path, 16<<20)
		if err != nil {
			return err
		}
		in.m.Containerd.Files = append(in.m.Containerd.Files, SavedFile{Path: ch.Path, Existed: b != nil, Before: b, Mode: mode})
	}
	if d := filepath.Dir(plan.DropIn); plan.DropIn != "" && in.m.Containerd.MadeDir == "" {
		if _, err := in.h.stat(d, unix.O_DIRECTORY); errors.Is(err, unix.ENOENT) {
			in.m.Containerd.MadeDir = d
		}
	}
	// containerd must restart once this changed, even if this run stops
	in.m.RestartPending = true
	if err := in.save(); err != nil {
		return err
	}
	done, err := in.swiftctl(ctx, args...)
	if err != nil {
		return err
	}
	for i, s := range in.m.Containerd.Files {
		sum, err := in.h.sum(s.Path)
		if err != nil {
			return err
		}
		in.m.Containerd.Files[i].After = sum
	}
	if err := in.save(); err != nil {
		return err
	}
	for _, ch := range done.Changes {
		log.G(ctx).Infof("install containerd: %s: %s", ch.What, ch.Path)
	}
	res.ContainerdChanged = done.Changed
	return nil
}

// runOnNode runs argv in the node's root (chroot to HostRoot), in a
// session of its own, with the node's PATH, and returns its stdout. Its
// output goes to files, not pipes: a daemon the command leaves behind
// holds no pipe of ours. On timeout its whole process group is killed.
func (in *Installer) runOnNode(ctx context.Context, timeout time.Duration, argv []string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command: %w", errdefs.ErrInvalidArgument)
	}
	path, err := in.h.lookPath(argv[0])
	if err != nil {
		return nil, err
	}
	// memory files: the image has no writable directory to count on
	var outs [2]*os.File
	for i, name := range []string{"stdout", "stderr"} {
		fd, err := unix.MemfdCreate("swift-install-"+name, unix.MFD_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("memfd for the command's %s: %w", name, err)
		}
		outs[i] = os.NewFile(uintptr(fd), name)
		defer outs[i].Close()
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + hostPATH}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if in.c.HostRoot != "/" {
		cmd.SysProcAttr.Chroot = in.c.HostRoot
	}
	cmd.Stdout, cmd.Stderr = outs[0], outs[1]
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	read := func(f *os.File) []byte {
		b, _ := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
		return b
	}
	stdout, stderr := read(outs[0]), read(outs[1])
	if err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w after %s: %w", err, timeout, context.DeadlineExceeded)
		}
		return stdout, fmt.Errorf("on the node, %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(stderr)))
	}
	return stdout, nil
}

// restart runs the restart command and clears RestartPending.
func (in *Installer) restart(ctx context.Context) error {
	if len(in.c.Restart) == 0 {
		log.G(ctx).Warn("containerd's config changed and no restart command is set: restart containerd on this node to apply it")
	} else {
		t0 := time.Now()
		out, err := in.runOnNode(ctx, in.c.RestartTimeout, in.c.Restart)
		if err != nil {
			return fmt.Errorf("restart containerd: %w", err)
		}
		log.G(ctx).Infof("containerd restarted (%s) in %s %s", strings.Join(in.c.Restart, " "), time.Since(t0).Round(time.Millisecond), strings.TrimSpace(string(out)))
	}
	in.m.RestartPending = false
	return in.save()
}

func (in *Installer) waitFor(ctx context.Context) error {
	for _, p := range in.c.WaitFor {
		for i := 0; ; i++ {
			b, err := in.h.read(p, maxFile)
			if err != nil {
				return err
			}
			if b != nil {
				break
			}
			if i%30 == 0 {
				log.G(ctx).Infof("install: waiting for %s on the node before labelling it", p)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w", p, ctx.Err())
			case <-time.After(2 * time.Second):
			}
		}
	}
	return nil
}

func (in *Installer) label(ctx context.Context, res *Result) error {
	l := in.c.Label
	if l == nil {
		return nil
	}
	if in.m.Label != nil && in.m.Label.Key != l.Key() {
		return fmt.Errorf("install labelled this node %s: uninstall first to label it %s: %w", in.m.Label.Key, l.Key(), errdefs.ErrFailedPrecondition)
	}
	cur, ok, err := l.Get(ctx, l.Key())
	if err != nil {
		return err
	}
	if in.m.Label == nil {
		in.m.Label = &Label{Key: l.Key()}
		if ok {
			in.m.Label.Previous = &cur
		}
	}
	in.m.Label.Value = l.Value()
	if err := in.save(); err != nil {
		return err
	}
	if ok && cur == l.Value() {
		return nil
	}
	v := l.Value()
	if err := l.Set(ctx, l.Key(), &v); err != nil {
		return err
	}
	log.G(ctx).Infof("install: node labelled %s=%s", l.Key(), v)
	res.Labelled = true
	return nil
}

// Uninstall undoes what the manifest records, in reverse order: the
// label, containerd's config (and a restart), the files, the directories.
func (in *Installer) Uninstall(ctx context.Context) (Result, error) {
	var res Result
	if _, err := in.h.stat(in.c.StateDir, unix.O_DIRECTORY); errors.Is(err, unix.ENOENT) {
		log.G(ctx).Infof("uninstall: nothing installed on this node (no %s)", in.c.StateDir)
		return res, nil
	}
	unlock, err := in.open(ctx)
	if err != nil {
		return res, err
	}
	defer unlock()
	if in.m.Prefix == "" {
		log.G(ctx).Infof("uninstall: nothing installed on this node (no %s)", in.manifestPath())
		return res, nil
	}
	if in.m.Owner != "" && in.m.Owner != in.c.Owner {
		return res, fmt.Errorf("this node has Swift installed by %s (manifest %s), not %s: left for it: %w",
			in.m.Owner, in.manifestPath(), in.c.Owner, errdefs.ErrFailedPrecondition)
	}
	if n := in.runningShims(); n > 0 {
		log.G(ctx).Warnf("uninstall: %d shims of %s still run (pods of the RuntimeClass not deleted): containerd cannot clean their containers up once the shim is gone", n, in.m.Prefix)
	}
	if lb := in.m.Label; lb != nil && in.c.Label != nil {
		// a label that cannot be reached does not keep the runtime entry
		// and the files on the node
		// the key install set, whatever the label's key is now
		cur, ok, err := in.c.Label.Get(ctx, lb.Key)
		switch {
		case err != nil:
			log.G(ctx).WithError(err).Warnf("uninstall: the node's label %s is left: remove it yourself", lb.Key)
		case ok && cur == lb.Value:
			if err := in.c.Label.Set(ctx, lb.Key, lb.Previous); err != nil {
				log.G(ctx).WithError(err).Warnf("uninstall: the node's label %s is left: remove it yourself", lb.Key)
			} else {
				res.Labelled = true
			}
		default:
			log.G(ctx).Warnf("uninstall: the node's label %s is %q now, not install's %q: left as it is", lb.Key, cur, lb.Value)
		}
		in.m.Label = nil
		if err := in.save(); err != nil {
			return res, err
		}
	}
	if c := in.m.Containerd; c != nil {
		pending := in.m.RestartPending
		in.m.RestartPending = true
		if err := in.save(); err != nil {
			return res, err
		}
		changed, err := in.uninstallContainerd(ctx, c)
		if err != nil {
			return res, err
		}
		in.m.Containerd, in.m.RestartPending = nil, pending || changed
		if err := in.save(); err != nil {
			return res, err
		}
		res.ContainerdChanged = changed
	}
	if in.m.RestartPending {
		if err := in.restart(ctx); err != nil {
			return res, err
		}
		res.Restarted = len(in.c.Restart) > 0
	}
	for _, f := range in.m.Files {
		removed, err := in.removeFile(ctx, f)
		if err != nil {
			return res, err
		}
		if removed {
			res.FilesRemoved++
		}
	}
	in.m.Files = nil
	if err := in.save(); err != nil {
		return res, err
	}
	if err := in.h.remove(in.manifestPath(), false); err != nil {
		return res, err
	}
	dirs := slices.Clone(in.m.Dirs)
	slices.SortStableFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		if err := in.h.remove(d, true); err != nil {
			if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
				log.G(ctx).Warnf("uninstall: %s holds files install did not write: left", d)
				continue
			}
			return res, err
		}
	}
	log.G(ctx).Infof("uninstall: %d files removed from %s", res.FilesRemoved, in.m.Prefix)
	in.m = Manifest{}
	return res, nil
}

// uninstallContainerd puts containerd's config files back as they were,
// when nobody changed them since; else it removes the runtime entry with
// the node's swiftctl uninstall containerd.
func (in *Installer) uninstallContainerd(ctx context.Context, c *Containerd) (bool, error) {
	untouched := true
	for _, s := range c.Files {
		sum, err := in.h.sum(s.Path)
		if err != nil {
			return false, err
		}
		if sum != s.After {
			untouched = false
			log.G(ctx).Warnf("uninstall: %s changed since install: the runtime entry is removed by swiftctl uninstall containerd instead", s.Path)
		}
	}
	if !untouched {
		r, err := in.swiftctl(ctx, "uninstall", "containerd", "--config", c.Config, "--runtime-name", c.Runtime)
		if err != nil {
			return false, err
		}
		if c.MadeDir != "" {
			if err := in.h.remove(c.MadeDir, true); err != nil && !errors.Is(err, unix.ENOTEMPTY) {
				return r.Changed, err
			}
		}
		return r.Changed, nil
	}
	changed := false
	for i := len(c.Files) - 1; i >= 0; i-- {
		s := c.Files[i]
		if s.Existed {
			mode := s.Mode
			if mode == 0 {
				mode = 0o644
			}
			if err := in.h.write(s.Path, s.Before, mode); err != nil {
				return changed, err
			}
		} else if err := in.h.remove(s.Path, false); err != nil {
			return changed, err
		}
		changed = true
		log.G(ctx).Infof("uninstall containerd: %s restored", s.Path)
	}
	if c.MadeDir != "" {
		if err := in.h.remove(c.MadeDir, true); err != nil && !errors.Is(err, unix.ENOTEMPTY) {
			return changed, err
		}
	}
	return changed, nil
}

// removeFile removes a file install wrote, when it is still install's,
// and puts back the one it set aside (also when its place is empty).
func (in *Installer) removeFile(ctx context.Context, f File) (bool, error) {
	cur, err := in.h.sum(f.Path)
	if err != nil {
		return false, err
	}
	if cur != "" && !f.ours(cur) {
		log.G(ctx).Warnf("uninstall: %s changed since install: left", f.Path)
		return false, nil
	}
	if f.Aside != "" {
		if a, err := in.h.sum(f.Aside); err != nil || a == "" {
			log.G(ctx).Warnf("uninstall: the node's own %s, set aside to %s, is not there (%v)", f.Path, f.Aside, err)
		} else if err := in.h.rename(f.Aside, f.Path); err != nil {
			return false, err
		} else {
			return cur != "", nil
		}
	}
	if cur == "" {
		return false, nil
	}
	return true, in.h.remove(f.Path, false)
}

// runningShims counts the processes running PREFIX's shim (the host's
// /proc: a hostPID pod's, or the node's own).
func (in *Installer) runningShims() int {
	shim := filepath.Join(in.m.Prefix, "bin", "containerd-shim-swift-v2")
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if exe, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && (exe == shim || exe == shim+" (deleted)") {
			n++
		}
	}
	return n
}
