package install

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/pelletier/go-toml/v2"

	"github.com/swift-rdma/swift-containerd/config/tomlfile"
	"github.com/swift-rdma/swift-containerd/internal/atomicfile"
	"github.com/swift-rdma/swift-containerd/internal/trust"
)

// Defaults of Options.
const (
	DefaultConfigPath  = "/etc/containerd/config.toml"
	DefaultRuntimeName = "swift"
	DefaultSwiftConfig = "/etc/swift/config.toml"
	DefaultBinaryName  = "/usr/sbin/runc"
)

// Marker comments written into the root config, so uninstall undoes only
// what install did.
const (
	markerCreated  = "# created by swiftctl install containerd"
	markerPrefix   = "# swiftctl install containerd added "
	markerAdded    = markerPrefix + "this entry for %s"
	markerExtended = markerPrefix + "%s to this entry, which was:"
	markerWasLine  = "#| "
)

// Options select the containerd configuration and the runtime entry.
type Options struct {
	// ConfigPath is containerd's root config (DefaultConfigPath if empty).
	ConfigPath string
	// RuntimeName names the runtime entry (DefaultRuntimeName if empty).
	RuntimeName string
	// SwiftConfig is the node config path the entry passes to the shim
	// (DefaultSwiftConfig if empty).
	SwiftConfig string
	// BinaryName is the runc the entry runs (--runc): it must be an
	// executable file. Empty: the BinaryName of the node's runc entry,
	// else DefaultBinaryName.
	BinaryName string
	// SystemdCgroup sets runc's SystemdCgroup option; false keeps the
	// runc entry's. Every other option of the runc entry is copied too.
	SystemdCgroup bool
	// CNIConfDir, when set, is the CNI config directory of the entry's
	// pods (containerd's per-runtime cni_conf_dir): pods of its
	// RuntimeClass get that network instead of the node's default one. It
	// must be an existing directory.
	CNIConfDir string
	// Shim, when set, is the shim binary the entry runs (containerd's
	// runtime_path): an absolute path of an executable file. Empty:
	// containerd looks containerd-shim-swift-v2 up in its PATH.
	Shim string
	// Version, when non-zero, is the config version the operator expects:
	// it must match the root config's, and it lets install create a
	// missing root config.
	Version int
}

func (o Options) withDefaults() Options {
	if o.ConfigPath == "" {
		o.ConfigPath = DefaultConfigPath
	}
	if o.RuntimeName == "" {
		o.RuntimeName = DefaultRuntimeName
	}
	if o.SwiftConfig == "" {
		o.SwiftConfig = DefaultSwiftConfig
	}
	return o
}

// Change is one file to write or remove.
type Change struct {
	Path string
	// Old is the current content (nil: the file does not exist); New the
	// content to write (nil: remove the file).
	Old, New []byte
	Mode     os.FileMode
	// What says what the change does, for humans.
	What string
}

// Plan is what install or uninstall would do.
type Plan struct {
	// Version is the root config's version (0 if unknown).
	Version int
	// DropIn is the drop-in file's path ("" if there is none).
	DropIn string
	// Changes are in the order Apply performs them; empty: nothing to do.
	Changes []Change
	// Notes are things the operator should know (not errors).
	Notes []string
}

// Empty tells whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Changes) == 0 }

// Diff renders the plan as a unified diff.
func (p *Plan) Diff() string {
	var b strings.Builder
	for _, c := range p.Changes {
		b.WriteString(UnifiedDiff(c.Path, c.Old, c.New))
	}
	return b.String()
}

// Report is a plan as `swiftctl install containerd -o json` prints it:
// what changed (or would, in a dry run), file by file.
type Report struct {
	Runtime string         `json:"runtime"`
	DropIn  string         `json:"drop_in,omitempty"`
	Changed bool           `json:"changed"`
	DryRun  bool           `json:"dry_run"`
	Changes []ReportChange `json:"changes"`
	Notes   []string       `json:"notes"`
}

// ReportChange is one file of a Report.
type ReportChange struct {
	Path string `json:"path"`
	// Action is "write" or "remove".
	Action string `json:"action"`
	What   string `json:"what"`
}

// Report describes the plan for the runtime entry name ("": the default).
func (p *Plan) Report(name string, dryRun bool) Report {
	if name == "" {
		name = DefaultRuntimeName
	}
	r := Report{Runtime: name, DropIn: p.DropIn, Changed: !p.Empty(), DryRun: dryRun,
		Changes: make([]ReportChange, len(p.Changes)), Notes: append([]string{}, p.Notes...)}
	for i, c := range p.Changes {
		r.Changes[i] = ReportChange{Path: c.Path, Action: "write", What: c.What}
		if c.New == nil {
			r.Changes[i].Action = "remove"
		}
	}
	return r
}

// Apply performs the plan: writes are atomic, removals ignore a file
// already gone.
func (p *Plan) Apply() error {
	for _, c := range p.Changes {
		if c.New == nil {
			if err := os.Remove(c.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove %s: %w", c.Path, err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(c.Path), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(c.Path), err)
		}
		if err := writeAtomic(c.Path, c.New, c.Mode); err != nil {
			return err
		}
	}
	return nil
}

// rootConfig is the parsed root config.
type rootConfig struct {
	Path    string
	Src     []byte // nil: the file does not exist
	Mode    os.FileMode
	Version int
	Imports []string
	Tree    map[string]any
}

func readRoot(path string) (*rootConfig, error) {
	rc := &rootConfig{Path: path, Mode: 0o644}
	src, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return rc, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read containerd config %s: %w", path, err)
	}
	if fi, err := os.Stat(path); err == nil {
		rc.Mode = fi.Mode().Perm()
	}
	rc.Src = src
	tree, err := parseTOML(path, src)
	if err != nil {
		return nil, err
	}
	rc.Tree = tree
	if v, ok := tree["version"]; ok {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("containerd config %s: `version` is %v, not an integer: %w", path, v, errdefs.ErrInvalidArgument)
		}
		rc.Version = int(n)
	}
	if v, ok := tree["imports"]; ok {
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("containerd config %s: `imports` is not an array: %w", path, errdefs.ErrInvalidArgument)
		}
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("containerd config %s: `imports` holds %v, not a string: %w", path, x, errdefs.ErrInvalidArgument)
			}
			rc.Imports = append(rc.Imports, s)
		}
	}
	return rc, nil
}

func parseTOML(path string, src []byte) (map[string]any, error) {
	var tree map[string]any
	if err := toml.Unmarshal(src, &tree); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%s: line %d, column %d: %s: %w", path, row, col, de.Error(), errdefs.ErrInvalidArgument)
		}
		return nil, fmt.Errorf("%s: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	return tree, nil
}

// readImported reads and parses f, a file the root config imports.
func readImported(f string) (map[string]any, error) {
	src, err := os.ReadFile(f)
	if err != nil {
		return nil, fmt.Errorf("read imported config %s: %w", f, err)
	}
	return parseTOML(f, src)
}

// resolve makes an import entry absolute the way containerd does: relative
// to the directory of the file that imports it.
func resolve(root, imp string) string {
	p := filepath.Clean(imp)
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(root), p)
	}
	return p
}

// dropInDir finds the first import entry that is a glob over a directory
// which would include NAME.toml. It returns the entry as written, the
// directory, and the drop-in path.
func dropInDir(rc *rootConfig, name string) (imp, dir, path string, ok bool) {
	for _, imp := range rc.Imports {
		p := resolve(rc.Path, imp)
		d, base := filepath.Split(p)
		d = filepath.Clean(d)
		if strings.ContainsAny(d, "*?[") || !strings.ContainsAny(base, "*?[") {
			continue
		}
		if m, err := filepath.Match(base, name+".toml"); err == nil && m {
			return imp, d, filepath.Join(d, name+".toml"), true
		}
	}
	return "", "", "", false
}

// lookup walks tree along keys.
func lookup(tree map[string]any, keys ...string) (any, bool) {
	var cur any = tree
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// isOurs tells whether tree declares runtime name with the Swift runtime type.
func isOurs(tree map[string]any, name string) bool {
	for _, plugin := range []string{PluginV2, PluginV3} {
		if t, ok := lookup(tree, "plugins", plugin, "containerd", "runtimes", name, "runtime_type"); ok && t == RuntimeType {
			return true
		}
	}
	return false
}

// declaresOurs tells whether tree declares any runtime of the Swift runtime type.
func declaresOurs(tree map[string]any) bool {
	for _, plugin := range []string{PluginV2, PluginV3} {
		rts, _ := lookup(tree, "plugins", plugin, "containerd", "runtimes")
		m, _ := rts.(map[string]any)
		for name := range m {
			if isOurs(tree, name) {
				return true
			}
		}
	}
	return false
}

// checkCNIConfDir accepts "" or an absolute path of an existing directory.
func checkCNIConfDir(dir string) error {
	if dir == "" {
		return nil
	}
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("CNI config directory %q: must be an absolute path: %w", dir, errdefs.ErrInvalidArgument)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("CNI config directory %s: %v: create it and put the pods' network config in it: %w", dir, err, errdefs.ErrNotFound)
	}
	if !fi.IsDir() {
		return fmt.Errorf("CNI config directory %s is not a directory: %w", dir, errdefs.ErrInvalidArgument)
	}
	// containerd runs the CNI plugins it names as root: whoever can write
	// it decides what they do to the node's network
	if _, err := trust.CheckDir(dir); err != nil {
		return fmt.Errorf("CNI config directory: %w", err)
	}
	return nil
}

// definesRuntime tells whether tree declares a runtime called name (any layout).
func definesRuntime(tree map[string]any, name string) bool {
	for _, plugin := range []string{PluginV2, PluginV3} {
		if _, ok := lookup(tree, "plugins", plugin, "containerd", "runtimes", name); ok {
			return true
		}
	}
	return false
}

// imported lists the files the root config's imports name today (globs
// expanded, sorted as containerd reads them), without skip.
func imported(rc *rootConfig, skip string) ([]string, error) {
	var out []string
	for _, imp := range rc.Imports {
		p := resolve(rc.Path, imp)
		if !strings.ContainsAny(p, "*?[") {
			if _, err := os.Stat(p); err == nil && p != skip {
				out = append(out, p)
			}
			continue
		}
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, fmt.Errorf("containerd config %s: import %q: %v: %w", rc.Path, imp, err, errdefs.ErrInvalidArgument)
		}
		sort.Strings(m)
		for _, f := range m {
			if f != skip {
				out = append(out, f)
			}
		}
	}
	return out, nil
}

// PlanInstall works out what installing the runtime entry changes.
func PlanInstall(o Options) (*Plan, error) {
	o = o.withDefaults()
	if err := ValidateRuntimeName(o.RuntimeName); err != nil {
		return nil, err
	}
	for k, p := range map[string]string{"swift config": o.SwiftConfig, "runc binary": o.BinaryName, "shim": o.Shim} {
		if p != "" && !filepath.IsAbs(p) {
			return nil, fmt.Errorf("%s %q: must be an absolute path: %w", k, p, errdefs.ErrInvalidArgument)
		}
	}
	if o.BinaryName != "" {
		if err := checkRunc(o.BinaryName); err != nil {
			return nil, err
		}
	}
	if o.Shim != "" {
		if err := checkShim(o.Shim); err != nil {
			return nil, err
		}
	}
	if err := checkCNIConfDir(o.CNIConfDir); err != nil {
		return nil, err
	}
	rc, err := readRoot(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	plan := &Plan{}
	rootNew := rc.Src
	if rc.Src == nil {
		if o.Version == 0 {
			return nil, fmt.Errorf("containerd config %s does not exist: create it (`containerd config default > %s` for containerd 2.x) "+
				"or pass --version 2 (containerd 1.7) or --version 3 (containerd 2.x) to create a minimal one: %w",
				o.ConfigPath, o.ConfigPath, errdefs.ErrNotFound)
		}
		if _, err := PluginFor(o.Version); err != nil {
			return nil, err
		}
		rc.Version = o.Version
		rootNew = fmt.Appendf(nil, "%s\nversion = %d\n", markerCreated, o.Version)
	}
	if _, err := PluginFor(rc.Version); err != nil {
		return nil, fmt.Errorf("containerd config %s: %w", o.ConfigPath, err)
	}
	if o.Version != 0 && o.Version != rc.Version {
		return nil, fmt.Errorf("containerd config %s says version %d, not %d as requested: %w",
			o.ConfigPath, rc.Version, o.Version, errdefs.ErrFailedPrecondition)
	}
	plan.Version = rc.Version

	imp, dir, dropIn, ok := dropInDir(rc, o.RuntimeName)
	if !ok {
		imp = filepath.Join(filepath.Dir(o.ConfigPath), "conf.d", "*.toml")
		dir = filepath.Dir(imp)
		dropIn = filepath.Join(dir, o.RuntimeName+".toml")
		rootNew, err = addImport(rootNew, imp)
		if err != nil {
			return nil, fmt.Errorf("containerd config %s: %w", o.ConfigPath, err)
		}
	}
	plan.DropIn = dropIn

	// Nothing else may declare the runtime, and on version 2 nothing else
	// may set the CRI section (containerd 1.7 would keep only one).
	if rc.Tree != nil && definesRuntime(rc.Tree, o.RuntimeName) {
		return nil, fmt.Errorf("containerd config %s already declares runtime %q: remove it there or choose another --runtime-name: %w",
			o.ConfigPath, o.RuntimeName, errdefs.ErrAlreadyExists)
	}
	others, err := imported(rc, dropIn)
	if err != nil {
		return nil, err
	}
	trees := []map[string]any{rc.Tree}
	files := []string{o.ConfigPath}
	for _, f := range others {
		tree, err := readImported(f)
		if err != nil {
			return nil, err
		}
		if definesRuntime(tree, o.RuntimeName) {
			return nil, fmt.Errorf("imported config %s already declares runtime %q: remove it there or choose another --runtime-name: %w",
				f, o.RuntimeName, errdefs.ErrAlreadyExists)
		}
		if _, ok := lookup(tree, "plugins", PluginV2); ok && rc.Version == 2 {
			return nil, fmt.Errorf("imported config %s sets [plugins.%q] too; containerd 1.7 keeps that section from one file only "+
				"(containerd#5837): move its settings into %s, then run install again: %w", f, PluginV2, o.ConfigPath, errdefs.ErrFailedPrecondition)
		}
		trees, files = append(trees, tree), append(files, f)
	}

	p := Params{
		Version: rc.Version, Name: o.RuntimeName, BinaryName: o.BinaryName, SystemdCgroup: o.SystemdCgroup,
		SwiftConfig: o.SwiftConfig, CNIConfDir: o.CNIConfDir, Shim: o.Shim, Root: o.ConfigPath, Dir: dir, Glob: imp,
	}
	// The shim delegates to runc: the entry runs runc as the node's runc
	// entry does (nvidia-ctk runtime configure does the same).
	if err := inheritRunc(&p, plan, o, trees, files); err != nil {
		return nil, err
	}
	if rc.Version == 2 {
		if sect, ok := lookup(rc.Tree, "plugins", PluginV2); ok {
			m, ok := sect.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("containerd config %s: plugins.%q is not a table: %w", o.ConfigPath, PluginV2, errdefs.ErrInvalidArgument)
			}
			p.CRISection = m
			plan.Notes = append(plan.Notes, fmt.Sprintf("the drop-in carries a copy of %s's [plugins.%q] (containerd 1.7 replaces whole plugin sections from imports): run install again after changing that section",
				o.ConfigPath, PluginV2))
		}
	}
	want, err := Render(p)
	if err != nil {
		return nil, err
	}

	old, err := os.ReadFile(dropIn)
	switch {
	case errors.Is(err, os.ErrNotExist):
		old = nil
	case err != nil:
		return nil, fmt.Errorf("read drop-in %s: %w", dropIn, err)
	default:
		tree, err := parseTOML(dropIn, old)
		if err != nil {
			return nil, fmt.Errorf("existing drop-in: %w (remove it, then run install again)", err)
		}
		if !isOurs(tree, o.RuntimeName) {
			return nil, fmt.Errorf("%s exists and does not declare runtime %q of type %s: not overwriting it: %w",
				dropIn, o.RuntimeName, RuntimeType, errdefs.ErrAlreadyExists)
		}
		if v, _ := tree["version"].(int64); int(v) != rc.Version {
			return nil, fmt.Errorf("existing drop-in %s says version %d but %s says version %d: "+
				"run `swiftctl uninstall containerd` and install again: %w", dropIn, v, o.ConfigPath, rc.Version, errdefs.ErrFailedPrecondition)
		}
	}
	if !bytes.Equal(old, want) {
		what := "create drop-in"
		if old != nil {
			what = "update drop-in"
		}
		plan.Changes = append(plan.Changes, Change{Path: dropIn, Old: old, New: want, Mode: 0o644, What: what})
	}
	if !bytes.Equal(rc.Src, rootNew) || rc.Src == nil {
		what := "add " + tomlfile.Quote(imp) + " to imports"
		if rc.Src == nil {
			what = "create a minimal root config importing " + tomlfile.Quote(imp)
		}
		plan.Changes = append(plan.Changes, Change{Path: o.ConfigPath, Old: rc.Src, New: rootNew, Mode: rc.Mode, What: what})
	}
	return plan, nil
}

// inheritRunc fills p's runc options from the runc entry of the merged
// configuration; what the operator asked for (o) wins.
func inheritRunc(p *Params, plan *Plan, o Options, trees []map[string]any, files []string) error {
	plugin, err := PluginFor(p.Version)
	if err != nil {
		return err
	}
	keys := []string{"plugins", plugin, "containerd", "runtimes", RuncRuntime, "options"}
	var runc map[string]any
	if v, ok := lookup(mergeTrees(p.Version, trees), keys...); ok {
		if runc, ok = v.(map[string]any); !ok {
			return fmt.Errorf("containerd config %s: %s is not a table: %w", files[0], strings.Join(keys, "."), errdefs.ErrInvalidArgument)
		}
	}
	from := ""
	for i, t := range trees {
		if _, ok := lookup(t, keys...); ok {
			from = files[i]
		}
	}
	where := fmt.Sprintf("the %s runtime entry of %s", RuncRuntime, from)
	binary, systemd, rest, notes, err := runcOptions(runc, where)
	if err != nil {
		return err
	}
	plan.Notes = append(plan.Notes, notes...)
	if p.BinaryName == "" {
		p.BinaryName = binary
	}
	if p.BinaryName == "" {
		p.BinaryName = DefaultBinaryName
		if checkRunc(DefaultBinaryName) != nil {
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s is not an executable file on this node and nothing else names runc: "+
				"install runc there or pass --runc PATH", DefaultBinaryName))
		}
	}
	p.SystemdCgroup = p.SystemdCgroup || systemd
	if len(runc) > 0 {
		p.RuncOptions, p.RuncFrom = rest, from
		copied := []string{}
		for _, k := range slices.Sorted(maps.Keys(runc)) {
			if _, ok := shimOptions[k]; ok && k != "SwiftConfig" {
				copied = append(copied, k)
			}
		}
		if len(copied) > 0 {
			plan.Notes = append(plan.Notes, fmt.Sprintf("the runtime entry copies runc's options (%s) from %s: run install again after changing them there",
				strings.Join(copied, ", "), where))
		}
	}
	return nil
}

// PlanUninstall works out what removing the runtime entry changes.
func PlanUninstall(o Options) (*Plan, error) {
	o = o.withDefaults()
	if err := ValidateRuntimeName(o.RuntimeName); err != nil {
		return nil, err
	}
	rc, err := readRoot(o.ConfigPath)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Version: rc.Version}
	if rc.Src == nil {
		return plan, nil
	}
	if _, _, dropIn, ok := dropInDir(rc, o.RuntimeName); ok {
		plan.DropIn = dropIn
		old, err := os.ReadFile(dropIn)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("read drop-in %s: %w", dropIn, err)
		default:
			tree, err := parseTOML(dropIn, old)
			if err != nil {
				return nil, fmt.Errorf("drop-in: %w (not removing it)", err)
			}
			if !isOurs(tree, o.RuntimeName) {
				return nil, fmt.Errorf("%s does not declare runtime %q of type %s: not removing it: %w",
					dropIn, o.RuntimeName, RuntimeType, errdefs.ErrFailedPrecondition)
			}
			plan.Changes = append(plan.Changes, Change{Path: dropIn, Old: old, What: "remove drop-in"})
		}
	}
	// The import stays while another drop-in of it declares a Swift
	// runtime (install run with another --runtime-name).
	others, err := imported(rc, plan.DropIn)
	if err != nil {
		return nil, err
	}
	for _, f := range others {
		tree, err := readImported(f)
		if err != nil {
			return nil, fmt.Errorf("%w (not uninstalling: it may declare another Swift runtime that needs the import)", err)
		}
		if declaresOurs(tree) {
			plan.Notes = append(plan.Notes, fmt.Sprintf("the import stays: %s declares another Swift runtime", f))
			return plan, nil
		}
	}
	rootNew, removed, err := removeImport(rc.Src)
	if err != nil {
		return nil, fmt.Errorf("containerd config %s: %w", o.ConfigPath, err)
	}
	if removed != "" {
		c := Change{Path: o.ConfigPath, Old: rc.Src, New: rootNew, Mode: rc.Mode, What: "remove " + tomlfile.Quote(removed) + " from imports"}
		if bytes.Equal(rootNew, fmt.Appendf(nil, "%s\nversion = %d\n", markerCreated, rc.Version)) {
			c.New, c.What = nil, "remove the root config install created"
		}
		plan.Changes = append(plan.Changes, c)
	}
	return plan, nil
}

// addImport adds imp to the top-level imports of src (creating the key after
// `version` when absent), leaving every other byte as it was and marking
// the edit for removeImport.
func addImport(src []byte, imp string) ([]byte, error) {
	entries, _ := topLevel(src)
	if e, ok := find(entries, "imports"); ok {
		var cur struct {
			Imports []string `toml:"imports"`
		}
		if err := toml.Unmarshal(src[e.Start:e.End], &cur); err != nil {
			return nil, fmt.Errorf("imports: %v: %w", err, errdefs.ErrInvalidArgument)
		}
		var b bytes.Buffer
		b.Write(src[:e.Start])
		fmt.Fprintf(&b, markerExtended+"\n", tomlfile.Quote(imp))
		for _, l := range strings.SplitAfter(strings.TrimSuffix(string(src[e.Start:e.End]), "\n"), "\n") {
			b.WriteString(markerWasLine + strings.TrimSuffix(l, "\n") + "\n")
		}
		fmt.Fprintf(&b, "imports = %s\n", quoteList(append(cur.Imports, imp)))
		b.Write(src[e.End:])
		return b.Bytes(), nil
	}
	v, ok := find(entries, "version")
	if !ok {
		return nil, fmt.Errorf("no top-level `version` to add imports after: %w", errdefs.ErrFailedPrecondition)
	}
	var b bytes.Buffer
	b.Write(src[:v.End])
	if v.End == len(src) && !bytes.HasSuffix(src, []byte("\n")) {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, markerAdded+"\nimports = %s\n", tomlfile.Quote(imp), quoteList([]string{imp}))
	b.Write(src[v.End:])
	return b.Bytes(), nil
}

// removeImport undoes addImport. It returns src unchanged and "" when src
// holds no marker. When the imports entry was edited since install, only the
// entry install added is taken out.
func removeImport(src []byte) ([]byte, string, error) {
	entries, _ := topLevel(src)
	e, ok := find(entries, "imports")
	if !ok {
		return src, "", nil
	}
	var cur struct {
		Imports []string `toml:"imports"`
	}
	if err := toml.Unmarshal(src[e.Start:e.End], &cur); err != nil {
		return nil, "", fmt.Errorf("imports: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	// the marker block is the comment lines right above the entry
	head := src[:e.Start]
	lines := strings.SplitAfter(string(head), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1]
	}
	i := len(lines)
	for i > 0 && strings.HasPrefix(lines[i-1], markerWasLine) {
		i--
	}
	was := lines[i:]
	if i == 0 {
		return src, "", nil // no marker: install did not touch imports
	}
	marker := strings.TrimSuffix(lines[i-1], "\n")
	blockStart := len(strings.Join(lines[:i-1], ""))
	extended, added, ok := parseMarker(marker)
	if !ok || extended != (len(was) > 0) {
		return src, "", nil
	}
	var restore []byte
	if !extended && slices.Equal(cur.Imports, []string{added}) {
		restore = []byte{} // the whole entry goes
	}
	if extended {
		var orig bytes.Buffer
		for _, l := range was {
			orig.WriteString(strings.TrimPrefix(l, markerWasLine))
		}
		var prev struct {
			Imports []string `toml:"imports"`
		}
		if err := toml.Unmarshal(orig.Bytes(), &prev); err == nil && slices.Equal(append(prev.Imports, added), cur.Imports) {
			restore = orig.Bytes()
		}
	}
	if restore == nil {
		// edited since install: drop only our entry, keep theirs
		var rest []string
		for _, s := range cur.Imports {
			if s != added {
				rest = append(rest, s)
			}
		}
		restore = fmt.Appendf(nil, "imports = %s\n", quoteList(rest))
	}
	var b bytes.Buffer
	b.Write(src[:blockStart])
	b.Write(restore)
	b.Write(src[e.End:])
	return b.Bytes(), added, nil
}

// parseMarker reads a marker line: whether install extended an existing
// entry (rather than adding it), and the import it added.
func parseMarker(line string) (extended bool, imp string, ok bool) {
	rest, ok := strings.CutPrefix(line, markerPrefix)
	if !ok {
		return false, "", false
	}
	rest, added := strings.CutPrefix(rest, "this entry for ")
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return false, "", false
	}
	imp, err = strconv.Unquote(q)
	if err != nil {
		return false, "", false
	}
	switch tail := rest[len(q):]; {
	case added && tail == "":
		return false, imp, true
	case !added && tail == " to this entry, which was:":
		return true, imp, true
	}
	return false, "", false
}

// writeAtomic replaces path with data (atomicfile), mode 0644 when mode is 0.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	if mode == 0 {
		mode = 0o644
	}
	return atomicfile.Write(path, data, mode)
}
