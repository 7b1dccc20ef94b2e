package nodeinstall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
}

// Labeler sets and reads the node's label.
type Labeler interface {
	// Key is the label's key, Value the value install sets.
	Key() string
	Value() string
	// Get returns the node's value of the label (ok false: unset).
	Get(ctx context.Context) (value string, ok bool, err error)
	// Set sets the label to *value, or removes it when value is nil.
	Set(ctx context.Context, value *string) error
}

// Manifest is what install did on the node.
type Manifest struct {
	Prefix string `json:"prefix"`
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
	// Aside is where a different file that was there before was set
	// aside ("": none was).
	Aside string `json:"aside,omitempty"`
}

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
	return &Installer{c: c, h: h}, nil
}

// Close releases the node's root.
func (in *Installer) Close() error { return in.h.Close() }

func (in *Installer) manifestPath() string { return filepath.Join(in.c.StateDir, ManifestName) }

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
	return nil
}

func (in *Installer) save() error {
	b, err := json.MarshalIndent(in.m, "", "  ")
	if err != nil {
		return err
	}
	return in.h.write(in.manifestPath(), append(b, '\n'), 0o600)
}

func (in *Installer) mkdirAll(p string) error {
	made, err := in.h.mkdirAll(p)
	for _, d := range made {
		if !slices.Contains(in.m.Dirs, d) {
			in.m.Dirs = append(in.m.Dirs, d)
		}
	}
	return err
}

// sources lists the files to install: path under From, and mode.
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
	if err := in.load(); err != nil {
		return res, err
	}
	if in.m.Prefix != "" && in.m.Prefix != in.c.Prefix {
		return res, fmt.Errorf("this node has Swift installed into %s (manifest %s): uninstall it first to install into %s: %w",
			in.m.Prefix, in.manifestPath(), in.c.Prefix, errdefs.ErrFailedPrecondition)
	}
	in.m.Prefix = in.c.Prefix
	if err := in.mkdirAll(in.c.StateDir); err != nil {
		return res, err
	}
	if err := in.save(); err != nil {
		return res, err
	}
	if err := in.installFiles(ctx, &res); err != nil {
		return res, err
	}
	if err := in.installContainerd(ctx, &res); err != nil {
		return res, err
	}
	if res.ContainerdChanged {
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
		data, err := os.ReadFile(filepath.Join(in.c.From, r))
		if err != nil {
			return fmt.Errorf("the image's %s: %w", r, err)
		}
		fi, err := os.Stat(filepath.Join(in.c.From, r))
		if err != nil {
			return err
		}
		sum := digest(data)
		cur, err := in.h.sum(dst)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(in.m.Files, func(f File) bool { return f.Path == dst })
		if cur == sum {
			continue
		}
		if err := in.mkdirAll(filepath.Dir(dst)); err != nil {
			return err
		}
		if cur != "" && (i < 0 || in.m.Files[i].SHA256 != cur) {
			// a file that is not ours: set aside, put back on uninstall
			aside := filepath.Join(in.c.StateDir, "aside", r)
			if err := in.mkdirAll(filepath.Dir(aside)); err != nil {
				return err
			}
			if err := in.h.rename(dst, aside); err != nil {
				return err
			}
			log.G(ctx).Warnf("install: %s was there and differs from Swift's: set aside to %s (put back on uninstall)", dst, aside)
			if i < 0 {
				in.m.Files = append(in.m.Files, File{Path: dst})
				i = len(in.m.Files) - 1
			}
			in.m.Files[i].Aside = aside
			if err := in.save(); err != nil {
				return err
			}
		}
		if i < 0 {
			in.m.Files = append(in.m.Files, File{Path: dst})
			i = len(in.m.Files) - 1
		}
		// recorded before it is written: a crash between leaves a file
		// uninstall recognises
		in.m.Files[i].SHA256 = sum
		if err := in.save(); err != nil {
			return err
		}
		if err := in.h.write(dst, data, fi.Mode().Perm()); err != nil {
			return err
		}
		res.FilesWritten++
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
		b, err := in.h.read(ch.Path, 16<<20)
		if err != nil {
			return err
		}
		s := SavedFile{Path: ch.Path, Existed: b != nil, Before: b}
		if b != nil {
			if fd, err := in.h.open(ch.Path, unix.O_PATH); err == nil {
				var st unix.Stat_t
				if unix.Fstat(fd, &st) == nil {
					s.Mode = fs.FileMode(st.Mode & 0o777)
				}
				unix.Close(fd)
			}
		}
		in.m.Containerd.Files = append(in.m.Containerd.Files, s)
	}
	if d := filepath.Dir(plan.DropIn); plan.DropIn != "" && in.m.Containerd.MadeDir == "" {
		if fd, err := in.h.open(d, unix.O_PATH|unix.O_DIRECTORY); err == nil {
			unix.Close(fd)
		} else if errors.Is(err, unix.ENOENT) {
			in.m.Containerd.MadeDir = d
		}
	}
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
// session of its own, with the node's PATH, and returns its stdout.
func (in *Installer) runOnNode(ctx context.Context, timeout time.Duration, argv []string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command: %w", errdefs.ErrInvalidArgument)
	}
	path, err := in.h.lookPath(argv[0])
	if err != nil {
		return nil, err
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
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w after %s: %w", err, timeout, context.DeadlineExceeded)
		}
		return stdout.Bytes(), fmt.Errorf("on the node, %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

func (in *Installer) restart(ctx context.Context) error {
	if len(in.c.Restart) == 0 {
		log.G(ctx).Warn("containerd's config changed and no restart command is set: restart containerd on this node to apply it")
		return nil
	}
	t0 := time.Now()
	out, err := in.runOnNode(ctx, in.c.RestartTimeout, in.c.Restart)
	if err != nil {
		return fmt.Errorf("restart containerd: %w", err)
	}
	log.G(ctx).Infof("containerd restarted (%s) in %s %s", strings.Join(in.c.Restart, " "), time.Since(t0).Round(time.Millisecond), strings.TrimSpace(string(out)))
	return nil
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
	cur, ok, err := l.Get(ctx)
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
	if err := l.Set(ctx, &v); err != nil {
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
	if err := in.load(); err != nil {
		return res, err
	}
	if in.m.Prefix == "" {
		log.G(ctx).Infof("uninstall: nothing installed on this node (no %s)", in.manifestPath())
		return res, nil
	}
	if lb := in.m.Label; lb != nil && in.c.Label != nil {
		// a label that cannot be reached does not keep the runtime entry
		// and the files on the node
		cur, ok, err := in.c.Label.Get(ctx)
		switch {
		case err != nil:
			log.G(ctx).WithError(err).Warnf("uninstall: the node's label %s is left: remove it yourself", lb.Key)
		case ok && cur == lb.Value:
			if err := in.c.Label.Set(ctx, lb.Previous); err != nil {
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
		changed, err := in.uninstallContainerd(ctx, c)
		if err != nil {
			return res, err
		}
		in.m.Containerd = nil
		if err := in.save(); err != nil {
			return res, err
		}
		if changed {
			res.ContainerdChanged = true
			if err := in.restart(ctx); err != nil {
				return res, err
			}
			res.Restarted = len(in.c.Restart) > 0
		}
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
	dirs := append([]string{filepath.Join(in.c.StateDir, "aside")}, in.m.Dirs...)
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
// and puts back the one it set aside.
func (in *Installer) removeFile(ctx context.Context, f File) (bool, error) {
	cur, err := in.h.sum(f.Path)
	if err != nil {
		return false, err
	}
	if cur != f.SHA256 {
		if cur != "" {
			log.G(ctx).Warnf("uninstall: %s changed since install: left", f.Path)
		}
		return false, nil
	}
	if f.Aside != "" {
		if err := in.h.rename(f.Aside, f.Path); err != nil {
			return false, err
		}
		return true, nil
	}
	return true, in.h.remove(f.Path, false)
}
