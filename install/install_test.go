package install

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// files is a scratch tree: relative path → content; "{D}" in content stands
// for the tree's directory.
type files map[string]string

func (f files) write(t *testing.T, dir string) {
	t.Helper()
	for p, c := range f {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(strings.ReplaceAll(c, "{D}", dir)), 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshot reads every regular file below dir.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[strings.TrimPrefix(p, dir+"/")] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInstallUninstall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tree    files
		opts    Options
		dropIn  string // relative to the scratch dir
		version int
		changes int // files install changes
		cri     bool
	}{
		{name: "v3 without imports", tree: files{"config.toml": "version = 3\n\n[plugins.\"io.containerd.cri.v1.runtime\".containerd]\n  default_runtime_name = \"runc\"\n"},
			dropIn: "conf.d/swift.toml", version: 3, changes: 2},
		{name: "v3 with conf.d import", tree: files{"config.toml": "version = 3\nimports = [\"{D}/conf.d/*.toml\"]\n", "conf.d/other.toml": "version = 3\n"},
			dropIn: "conf.d/swift.toml", version: 3, changes: 1},
		{name: "v3 with a relative import", tree: files{"config.toml": "version = 3\nimports = [\"drop/*.toml\"]\n"},
			dropIn: "drop/swift.toml", version: 3, changes: 1},
		{name: "v3 with only a file import", tree: files{"config.toml": "version = 3\nimports = [\n  \"{D}/extra.toml\",\n]\n", "extra.toml": "version = 3\n"},
			dropIn: "conf.d/swift.toml", version: 3, changes: 2},
		{name: "v3 with a glob that does not match", tree: files{"config.toml": "version = 3\nimports = [\"{D}/conf.d/*.conf\"]\n"},
			dropIn: "conf.d/swift.toml", version: 3, changes: 2},
		{name: "v4 (containerd 2.4 default)", tree: files{"config.toml": "version = 4\nroot = '/var/lib/containerd'\nimports = ['{D}/conf.d/*.toml']\n"},
			dropIn: "conf.d/swift.toml", version: 4, changes: 1},
		{name: "v2 with a CRI section", tree: files{"config.toml": "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"pause:3.9\"\n"},
			dropIn: "conf.d/swift.toml", version: 2, changes: 2, cri: true},
		{name: "v2 without a CRI section", tree: files{"config.toml": "version = 2\n"}, opts: Options{Version: 2},
			dropIn: "conf.d/swift.toml", version: 2, changes: 2},
		{name: "missing root config with --version", tree: files{}, opts: Options{Version: 3},
			dropIn: "conf.d/swift.toml", version: 3, changes: 2},
		{name: "other name and flags", tree: files{"config.toml": "version = 3\n"},
			opts:   Options{RuntimeName: "rdma", SwiftConfig: "/x/swift.toml", BinaryName: "/usr/bin/runc", SystemdCgroup: true},
			dropIn: "conf.d/rdma.toml", version: 3, changes: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.tree.write(t, dir)
			before := snapshot(t, dir)
			o := tc.opts
			o.ConfigPath = filepath.Join(dir, "config.toml")

			plan, err := PlanInstall(o)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Changes) != tc.changes || plan.Version != tc.version || plan.DropIn != filepath.Join(dir, tc.dropIn) {
				t.Fatalf("plan = %d changes, version %d, drop-in %s; want %d, %d, %s", len(plan.Changes), plan.Version, plan.DropIn,
					tc.changes, tc.version, filepath.Join(dir, tc.dropIn))
			}
			diff := plan.Diff()
			if !strings.Contains(diff, "+++ "+plan.DropIn+"\n") || !strings.Contains(diff, "+  runtime_type = \"io.containerd.swift.v2\"\n") {
				t.Errorf("diff lacks the drop-in:\n%s", diff)
			}
			if got := snapshot(t, dir); !maps.Equal(got, before) {
				t.Fatalf("planning wrote files")
			}
			if err := plan.Apply(); err != nil {
				t.Fatal(err)
			}

			// the drop-in is the rendered template, in the root's version
			b, err := os.ReadFile(plan.DropIn)
			if err != nil {
				t.Fatal(err)
			}
			tree, err := parseTOML(plan.DropIn, b)
			if err != nil {
				t.Fatal(err)
			}
			name := o.withDefaults().RuntimeName
			if !isOurs(tree, name) || tree["version"] != int64(tc.version) {
				t.Errorf("drop-in is not a version %d entry for %s:\n%s", tc.version, name, b)
			}
			if _, ok := lookup(tree, "plugins", PluginV2, "sandbox_image"); ok != tc.cri {
				t.Errorf("drop-in carries the CRI section: %v, want %v", ok, tc.cri)
			}
			// the root config now imports it
			rc, err := readRoot(o.ConfigPath)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, p, ok := dropInDir(rc, name); !ok || p != plan.DropIn {
				t.Errorf("root config imports %q, not the drop-in %s", rc.Imports, plan.DropIn)
			}
			if fi, err := os.Stat(o.ConfigPath); err == nil && tc.tree["config.toml"] != "" && fi.Mode().Perm() != 0o640 {
				t.Errorf("root config mode = %v, want 0640 kept", fi.Mode().Perm())
			}

			// idempotent
			again, err := PlanInstall(o)
			if err != nil {
				t.Fatal(err)
			}
			if !again.Empty() {
				t.Fatalf("second install would change:\n%s", again.Diff())
			}

			// uninstall restores every byte; a second uninstall does nothing
			un, err := PlanUninstall(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := un.Apply(); err != nil {
				t.Fatal(err)
			}
			after := snapshot(t, dir)
			if !maps.Equal(after, before) {
				t.Errorf("uninstall left\n%q\nwant\n%q", after, before)
			}
			un2, err := PlanUninstall(o)
			if err != nil {
				t.Fatal(err)
			}
			if !un2.Empty() {
				t.Errorf("second uninstall would change:\n%s", un2.Diff())
			}
		})
	}
}

func TestInstallRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree files
		opts Options
		err  error
		msg  string
	}{
		{"missing root config", files{}, Options{}, errdefs.ErrNotFound, "--version"},
		{"version 1", files{"config.toml": "version = 1\n"}, Options{}, errdefs.ErrFailedPrecondition, "version 1"},
		{"no version", files{"config.toml": "root = \"/r\"\n"}, Options{}, errdefs.ErrFailedPrecondition, "containerd config migrate"},
		{"unknown version", files{"config.toml": "version = 9\n"}, Options{}, errdefs.ErrFailedPrecondition, "version 9"},
		{"version flag mismatch", files{"config.toml": "version = 2\n"}, Options{Version: 3}, errdefs.ErrFailedPrecondition, "says version 2, not 3"},
		{"version 1 requested for a new root", files{}, Options{Version: 1}, errdefs.ErrFailedPrecondition, "version 1"},
		{"drop-in of another version", files{"config.toml": "version = 3\nimports = [\"{D}/conf.d/*.toml\"]\n",
			"conf.d/swift.toml": "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.swift]\nruntime_type = \"io.containerd.swift.v2\"\n"},
			Options{}, errdefs.ErrFailedPrecondition, "says version 2"},
		{"foreign file at the drop-in path", files{"config.toml": "version = 3\nimports = [\"{D}/conf.d/*.toml\"]\n",
			"conf.d/swift.toml": "version = 3\n# mine\n"}, Options{}, errdefs.ErrAlreadyExists, "not overwriting"},
		{"root declares the runtime", files{"config.toml": "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.swift]\nruntime_type = \"io.containerd.runc.v2\"\n"},
			Options{}, errdefs.ErrAlreadyExists, "already declares runtime \"swift\""},
		{"another drop-in declares the runtime", files{"config.toml": "version = 3\nimports = [\"{D}/conf.d/*.toml\"]\n",
			"conf.d/10-x.toml": "version = 3\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.swift]\nruntime_type = \"io.containerd.swift.v2\"\n"},
			Options{}, errdefs.ErrAlreadyExists, "10-x.toml already declares"},
		{"v2: another drop-in sets the CRI section", files{"config.toml": "version = 2\nimports = [\"{D}/conf.d/*.toml\"]\n",
			"conf.d/cni.toml": "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\nbin_dir = \"/opt/cni/bin\"\n"},
			Options{}, errdefs.ErrFailedPrecondition, "containerd#5837"},
		{"malformed root config", files{"config.toml": "version = 3\n[plugins\n"}, Options{}, errdefs.ErrInvalidArgument, "line 2"},
		{"bad runtime name", files{"config.toml": "version = 3\n"}, Options{RuntimeName: "Swift"}, errdefs.ErrInvalidArgument, "DNS label"},
		{"relative swift config", files{"config.toml": "version = 3\n"}, Options{SwiftConfig: "swift.toml"}, errdefs.ErrInvalidArgument, "absolute"},
		{"relative CNI config directory", files{"config.toml": "version = 3\n"}, Options{CNIConfDir: "podnet.d"}, errdefs.ErrInvalidArgument, "CNI config directory \"podnet.d\": must be an absolute path"},
		{"missing CNI config directory", files{"config.toml": "version = 3\n"}, Options{CNIConfDir: "/nonexistent/podnet.d"}, errdefs.ErrNotFound, "CNI config directory /nonexistent/podnet.d"},
		{"relative shim", files{"config.toml": "version = 3\n"}, Options{Shim: "bin/containerd-shim-swift-v2"}, errdefs.ErrInvalidArgument, "shim \"bin/containerd-shim-swift-v2\": must be an absolute path"},
		{"missing shim", files{"config.toml": "version = 3\n"}, Options{Shim: "/nonexistent/containerd-shim-swift-v2"}, errdefs.ErrNotFound, "shim /nonexistent/containerd-shim-swift-v2 does not exist"},
		{"shim not executable", files{"config.toml": "version = 3\n", "shim": "#!/bin/sh\n"}, Options{Shim: "{D}/shim"}, errdefs.ErrFailedPrecondition, "is not an executable file"},
		{"CNI config directory is a file", files{"config.toml": "version = 3\n", "podnet.conflist": "{}\n"}, Options{CNIConfDir: "{D}/podnet.conflist"},
			errdefs.ErrInvalidArgument, "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.tree.write(t, dir)
			before := snapshot(t, dir)
			o := tc.opts
			o.ConfigPath = filepath.Join(dir, "config.toml")
			o.CNIConfDir = strings.ReplaceAll(o.CNIConfDir, "{D}", dir)
			o.Shim = strings.ReplaceAll(o.Shim, "{D}", dir)
			_, err := PlanInstall(o)
			if !errors.Is(err, tc.err) || !strings.Contains(fmtyErr(err), tc.msg) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.err, tc.msg)
			}
			if !maps.Equal(snapshot(t, dir), before) {
				t.Error("a refused install changed files")
			}
		})
	}
}

// A CNI config directory that others may write would let them choose what
// the root-run CNI plugins do: refused, naming it.
func TestInstallRefusesOpenCNIDir(t *testing.T) {
	dir := t.TempDir()
	files{"config.toml": "version = 3\n", "open.d/10.conflist": "{}\n"}.write(t, dir)
	open := filepath.Join(dir, "open.d")
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	_, err := PlanInstall(Options{ConfigPath: filepath.Join(dir, "config.toml"), RuntimeName: "swift-podnet", CNIConfDir: open})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), open) {
		t.Fatalf("err = %v, want FailedPrecondition naming %s", err, open)
	}
	if !maps.Equal(snapshot(t, dir), before) {
		t.Error("a refused install changed files")
	}
}

// Two runtime entries (the second with its own CNI network) share the
// import: uninstalling either keeps the import for the other, and
// uninstalling both restores every byte.
func TestInstallTwoEntries(t *testing.T) {
	for _, order := range [][2]string{{"swift", "swift-podnet"}, {"swift-podnet", "swift"}} {
		t.Run(order[0]+" first out", func(t *testing.T) {
			dir := t.TempDir()
			files{"config.toml": "version = 3\n", "podnet.d/10-podnet.conflist": "{}\n"}.write(t, dir)
			before := snapshot(t, dir)
			root := filepath.Join(dir, "config.toml")
			opts := map[string]Options{
				"swift":        {ConfigPath: root, RuntimeName: "swift"},
				"swift-podnet": {ConfigPath: root, RuntimeName: "swift-podnet", SwiftConfig: "/etc/swift/podnet.toml", CNIConfDir: filepath.Join(dir, "podnet.d")},
			}
			for _, name := range []string{"swift", "swift-podnet"} {
				plan, err := PlanInstall(opts[name])
				if err != nil {
					t.Fatal(err)
				}
				if err := plan.Apply(); err != nil {
					t.Fatal(err)
				}
			}
			podnet, err := os.ReadFile(filepath.Join(dir, "conf.d/swift-podnet.toml"))
			if err != nil {
				t.Fatal(err)
			}
			want := "  cni_conf_dir = \"" + dir + "/podnet.d\"\n"
			if !strings.Contains(string(podnet), want) {
				t.Errorf("swift-podnet drop-in lacks %q:\n%s", want, podnet)
			}
			if plain, _ := os.ReadFile(filepath.Join(dir, "conf.d/swift.toml")); strings.Contains(string(plain), "cni_conf_dir") {
				t.Errorf("swift drop-in has a cni_conf_dir:\n%s", plain)
			}
			rootAfter, _ := os.ReadFile(root)

			un, err := PlanUninstall(opts[order[0]])
			if err != nil {
				t.Fatal(err)
			}
			if err := un.Apply(); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(root); string(b) != string(rootAfter) {
				t.Errorf("uninstalling %s changed the root config while %s remains:\n%s", order[0], order[1], b)
			}
			if len(un.Notes) != 1 || !strings.Contains(un.Notes[0], "conf.d/"+order[1]+".toml declares another Swift runtime") {
				t.Errorf("notes = %q", un.Notes)
			}
			rc, err := readRoot(root)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, p, ok := dropInDir(rc, order[1]); !ok || p != filepath.Join(dir, "conf.d", order[1]+".toml") {
				t.Errorf("%s's drop-in is no longer imported: imports %q", order[1], rc.Imports)
			}
			if _, err := os.Stat(filepath.Join(dir, "conf.d", order[0]+".toml")); !os.IsNotExist(err) {
				t.Errorf("%s's drop-in is still there: %v", order[0], err)
			}

			un, err = PlanUninstall(opts[order[1]])
			if err != nil {
				t.Fatal(err)
			}
			if err := un.Apply(); err != nil {
				t.Fatal(err)
			}
			if after := snapshot(t, dir); !maps.Equal(after, before) {
				t.Errorf("uninstalling both left\n%q\nwant\n%q", after, before)
			}
		})
	}
}

func TestUninstallRefusesForeignDropIn(t *testing.T) {
	dir := t.TempDir()
	files{"config.toml": "version = 3\nimports = [\"{D}/conf.d/*.toml\"]\n", "conf.d/swift.toml": "version = 3\n"}.write(t, dir)
	_, err := PlanUninstall(Options{ConfigPath: filepath.Join(dir, "config.toml")})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("err = %v, want FailedPrecondition", err)
	}
}

// A malformed file beside the drop-in might be another Swift entry that
// needs the import: uninstall refuses, naming it, and changes nothing.
func TestUninstallRefusesMalformedNeighbour(t *testing.T) {
	dir := t.TempDir()
	o := Options{ConfigPath: filepath.Join(dir, "config.toml")}
	files{"config.toml": "version = 3\n"}.write(t, dir)
	plan, err := PlanInstall(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(); err != nil {
		t.Fatal(err)
	}
	files{"conf.d/other.toml": "version = 3\n[plugins\n"}.write(t, dir)
	before := snapshot(t, dir)
	_, err = PlanUninstall(o)
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(fmtyErr(err), "conf.d/other.toml") {
		t.Fatalf("err = %v, want InvalidArgument naming conf.d/other.toml", err)
	}
	if !maps.Equal(snapshot(t, dir), before) {
		t.Error("a refused uninstall changed files")
	}
}

// The operator's later edits survive uninstall.
func TestUninstallKeepsEdits(t *testing.T) {
	o, plan := installed(t, "version = 3\n")
	b, _ := os.ReadFile(o.ConfigPath)
	b = append(b, "\n[debug]\n  level = \"debug\"\n"...)
	b = bytes.Replace(b, []byte("imports = ["), []byte("imports = [\"/extra.toml\", "), 1)
	if err := os.WriteFile(o.ConfigPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	un, err := PlanUninstall(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := un.Apply(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(o.ConfigPath)
	want := "version = 3\nimports = [\"/extra.toml\"]\n\n[debug]\n  level = \"debug\"\n"
	if string(got) != want {
		t.Errorf("root config after uninstall = %q, want %q", got, want)
	}
	if _, err := os.Stat(plan.DropIn); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("drop-in still there: %v", err)
	}
}

// Changing a flag updates the drop-in in place.
func TestInstallUpdates(t *testing.T) {
	o, _ := installed(t, "version = 3\n")
	o.SwiftConfig = "/srv/swift.toml"
	up, err := PlanInstall(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(up.Changes) != 1 || up.Changes[0].What != "update drop-in" ||
		!strings.Contains(up.Diff(), "-  SwiftConfig = \"/etc/swift/config.toml\"\n+  SwiftConfig = \"/srv/swift.toml\"\n") {
		t.Fatalf("update plan = %+v\n%s", up.Changes, up.Diff())
	}
}

// installed writes root as config.toml in a fresh directory and applies
// an install with default options to it.
func installed(t *testing.T, root string) (Options, *Plan) {
	t.Helper()
	dir := t.TempDir()
	files{"config.toml": root}.write(t, dir)
	o := Options{ConfigPath: filepath.Join(dir, "config.toml")}
	plan, err := PlanInstall(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.Apply(); err != nil {
		t.Fatal(err)
	}
	return o, plan
}

func fmtyErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
