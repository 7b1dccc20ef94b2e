package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// EnvCrictlBin names the directory holding crictl.
const EnvCrictlBin = "SWIFT_CRICTL_BIN"

// CRINamespace is the containerd namespace CRI keeps pods and images in.
const CRINamespace = "k8s.io"

// CRIConfig enables containerd's CRI plugin in Start. The harness writes
// it in the daemon's format: config version 3 (plugins
// io.containerd.cri.v1.images / io.containerd.cri.v1.runtime) for 2.x,
// version 2 (plugin io.containerd.grpc.v1.cri) for 1.7.
type CRIConfig struct {
	CrictlBin    string // dir with crictl; defaults to $SWIFT_CRICTL_BIN
	SandboxImage string // pinned sandbox (pause) image; import it before the first pod
	// CNIDir holds the CNI config and plugin dirs; defaults to <dir>/cni
	// (empty, so only host-network pods can run, and the host's CNI setup
	// is never read).
	CNIDir   string
	Runtimes []CRIRuntime
}

// CRIRuntime is one entry under containerd.runtimes.
type CRIRuntime struct {
	Name                 string // the CRI runtime handler, e.g. swift
	Type                 string // runtime_type, e.g. io.containerd.swift.v2
	PodAnnotations       []string
	ContainerAnnotations []string
	// Options go to the entry's options table: string, bool or integer values.
	Options map[string]any
}

func (c *CRIConfig) missing() []string {
	if c.CrictlBin == "" {
		c.CrictlBin = os.Getenv(EnvCrictlBin)
	}
	if c.CrictlBin == "" || !isExec(filepath.Join(c.CrictlBin, "crictl")) {
		return []string{fmt.Sprintf("crictl in $%s=%q (run `make deps`)", EnvCrictlBin, c.CrictlBin)}
	}
	return nil
}

// config returns the config text for d (whose Major is set) and writes
// crictl's config file below d.Dir.
func (c *CRIConfig) config(d *Daemon) ([]byte, error) {
	cni := c.CNIDir
	if cni == "" {
		cni = filepath.Join(d.Dir, "cni")
	}
	for _, sub := range []string{"net.d", "bin"} {
		if err := os.MkdirAll(filepath.Join(cni, sub), 0o755); err != nil {
			return nil, err
		}
	}
	crictlCfg := fmt.Sprintf("runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\ndebug: false\npull-image-on-create: false\n", d.Socket, d.Socket)
	if err := os.WriteFile(d.crictlConfig(), []byte(crictlCfg), 0o644); err != nil {
		return nil, err
	}

	// restrict_oom_score_adj: CRI gives the sandbox oom_score_adj -998,
	// which needs CAP_SYS_RESOURCE (runc fails with "can't get final
	// child's PID from pipe" without it); restricted, scores are never set
	// below containerd's own, which a test daemon needs no more than that.
	var b bytes.Buffer
	runtimes := ""
	if d.Major >= 2 {
		runtimes = `plugins."io.containerd.cri.v1.runtime".containerd.runtimes`
		b.WriteString("[plugins.\"io.containerd.cri.v1.runtime\"]\n  restrict_oom_score_adj = true\n")
		fmt.Fprintf(&b, "[plugins.\"io.containerd.cri.v1.images\".pinned_images]\n  sandbox = %q\n", c.SandboxImage)
		fmt.Fprintf(&b, "[plugins.\"io.containerd.cri.v1.runtime\".cni]\n  bin_dirs = [%q]\n  conf_dir = %q\n",
			filepath.Join(cni, "bin"), filepath.Join(cni, "net.d"))
	} else {
		runtimes = `plugins."io.containerd.grpc.v1.cri".containerd.runtimes`
		fmt.Fprintf(&b, "[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = %q\n  restrict_oom_score_adj = true\n", c.SandboxImage)
		fmt.Fprintf(&b, "[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = %q\n  conf_dir = %q\n",
			filepath.Join(cni, "bin"), filepath.Join(cni, "net.d"))
	}
	rts := c.Runtimes
	if d.Major < 2 && !slices.ContainsFunc(rts, func(r CRIRuntime) bool { return r.Name == "runc" }) {
		// 1.7 replaces its default runtimes table with the configured one,
		// and refuses a config without its default runtime, runc.
		rts = append([]CRIRuntime{{Name: "runc", Type: "io.containerd.runc.v2"}}, rts...)
	}
	for _, r := range rts {
		fmt.Fprintf(&b, "[%s.%s]\n  runtime_type = %q\n", runtimes, r.Name, r.Type)
		fmt.Fprintf(&b, "  pod_annotations = %s\n  container_annotations = %s\n", tomlStrings(r.PodAnnotations), tomlStrings(r.ContainerAnnotations))
		if len(r.Options) == 0 {
			continue
		}
		fmt.Fprintf(&b, "[%s.%s.options]\n", runtimes, r.Name)
		keys := make([]string, 0, len(r.Options))
		for k := range r.Options {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			switch v := r.Options[k].(type) {
			case string:
				fmt.Fprintf(&b, "  %s = %q\n", k, v)
			case bool, int, int64, uint32, uint64:
				fmt.Fprintf(&b, "  %s = %v\n", k, v)
			default:
				return nil, fmt.Errorf("runtime %s option %s: unsupported value type %T", r.Name, k, v)
			}
		}
	}
	return b.Bytes(), nil
}

func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func (d *Daemon) crictlConfig() string { return filepath.Join(d.Dir, "crictl.yaml") }

// Crictl runs crictl against the daemon's CRI endpoint (Start with
// Options.CRI set).
func (d *Daemon) Crictl(ctx context.Context, args ...string) (string, string, error) {
	if d.crictl == "" {
		return "", "", fmt.Errorf("crictl: the daemon was started without Options.CRI")
	}
	full := append([]string{"--config", d.crictlConfig()}, args...)
	cmd := exec.CommandContext(ctx, d.crictl, full...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	return so.String(), se.String(), err
}

// CtrIn runs ctr against the daemon in namespace ns.
func (d *Daemon) CtrIn(ctx context.Context, ns string, args ...string) (string, string, error) {
	full := append([]string{"--address", d.Socket, "--namespace", ns}, args...)
	cmd := exec.CommandContext(ctx, d.ctr, full...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	return so.String(), se.String(), err
}

// ImportImage writes img as a docker archive below d.Dir and imports it
// into namespace ns with ctr (unpacked for the default snapshotter).
func (d *Daemon) ImportImage(ctx context.Context, ns string, img Image) error {
	name := strings.NewReplacer("/", "_", ":", "_").Replace(img.Ref) + ".tar"
	tarPath := filepath.Join(d.Dir, name)
	if err := WriteDockerArchive(tarPath, img); err != nil {
		return err
	}
	if _, se, err := d.CtrIn(ctx, ns, "images", "import", tarPath); err != nil {
		return fmt.Errorf("ctr -n %s images import %s: %v: %s", ns, tarPath, err, se)
	}
	return nil
}

// BundleDirIn is where the runtime v2 shim keeps the bundle of container
// id of namespace ns (for a CRI sandbox, id is the pod sandbox id).
func (d *Daemon) BundleDirIn(ns, id string) string {
	return filepath.Join(d.State, "io.containerd.runtime.v2.task", ns, id)
}
