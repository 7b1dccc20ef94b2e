package shim

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/hooks"
	"github.com/swift-rdma/swift-containerd/inject"
	"github.com/swift-rdma/swift-containerd/internal/atomicfile"
	"github.com/swift-rdma/swift-containerd/internal/trust"
	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/policy"
	"github.com/swift-rdma/swift-containerd/rdma"
	"github.com/swift-rdma/swift-containerd/verbs"
)

// SpecFile is the OCI spec's name inside a bundle.
const SpecFile = "config.json"

// Node says where EditBundle looks at the node.
type Node struct {
	// CgroupRoot is where cgroup hierarchies are mounted (/sys/fs/cgroup).
	CgroupRoot string
}

// zygoteHere tells whether this container runs the zygote asked for: in a
// pod whose annotations name a zygote container (they reach every
// container), only that one does; the others get RDMA without a zygote.
func zygoteHere(s *specs.Spec, o annotations.Options) bool {
	name := s.Annotations[annotations.CRIContainerName]
	return o.ZygoteContainer == "" || name == "" || name == o.ZygoteContainer
}

// decision is everything Create decides for an opted-in container, with
// no side effect: the tenant and what it grants (the devices, the limits,
// the lease's charge), every spec edit (verbs included), the files to
// write (the zygote's pool description and key copy) and the warnings.
// editBundle only applies it.
type decision struct {
	tenancy  *tenancy
	mods     []inject.Modifier
	zygote   *zygotePrep // nil without a zygote here
	warnings []string
}

// decide makes the decision for spec (opts are its parsed annotations;
// cfg was read from cfgPath; pol, when not nil, is the node's policy as
// this Create already read it).
func decide(ctx context.Context, bundle, cfgPath string, spec *specs.Spec, cfg config.Config, pol *policy.Policy, opts annotations.Options, node Node) (*decision, error) {
	inv, err := rdma.Discover(cfg.RDMA.SysRoot, cfg.RDMA.DevRoot)
	if err != nil {
		return nil, fmt.Errorf("discover RDMA devices: %w", err)
	}
	// Devices allocated before the shim (a device plugin, CDI, DRA, NRI)
	// are the container's devices: nothing else is injected.
	alloc, err := inject.Allocated(spec, inv)
	if err != nil {
		return nil, err
	}
	if alloc != nil {
		inv = inv.Only(alloc)
		log.G(ctx).WithField("allocated", strings.Join(alloc, ",")).Debug("swift: the spec holds RDMA devices: using those")
	}
	// The tenant policy: who the container belongs to, and what it may have.
	ten, err := decideTenancy(ctx, bundle, spec, cfg, pol, opts, inv, alloc != nil)
	if err != nil {
		return nil, err
	}
	opts = ten.opts
	hard, canRaise := rdma.MemlockLimits()
	in := inject.Node{
		Inventory: inv, Allocated: alloc != nil, RDMACgroup: rdma.CgroupAvailable(node.CgroupRoot),
		MemlockHard: hard, CanRaiseMemlock: canRaise,
		Limits: &ten.limits, Seccomp: ten.seccomp, DropCapabilities: ten.dropCaps,
	}
	hook, err := hookPath(cfg)
	if err != nil {
		return nil, err
	}
	// netcheck needs the container's network namespace: one that exists
	// already (the node's, a CRI pod's) is checked here, at once; a new
	// one only by the createRuntime hook, once runc made it
	nsPath, nsExists := netnsOf(spec)
	in.Hooks = &inject.Hooks{Path: hook, SysRoot: cfg.RDMA.SysRoot, ConfigPath: cfgPath,
		NetCheck: cfg.Hooks.NetCheck && !nsExists, Move: cfg.Hooks.ExclusiveMove}
	d := &decision{tenancy: ten}
	if opts.Zygote != nil && *opts.Zygote && zygoteHere(spec, opts) {
		if d.zygote, err = prepareZygote(bundle, cfg, ten, spec); err != nil {
			return nil, err
		}
		in.Zygote = d.zygote.mod
	}
	if d.mods, d.warnings, err = inject.Plan(cfg, opts, in); err != nil {
		return nil, err
	}
	if cfg.Hooks.NetCheck && nsExists {
		for _, m := range d.mods {
			if h, ok := m.(inject.Hooks); ok {
				if err := hooks.NetCheckAt(nsPath, cfg.RDMA.SysRoot, h.Devices, cfg.Hooks.ExclusiveMove); err != nil {
					return nil, err
				}
			}
		}
	}
	vd := inject.DecideVerbs(opts.Verbs, verbs.Check(verbs.Node{StateDir: cfg.StateDir, Sources: verbs.Sources{SysRoot: cfg.RDMA.SysRoot}}))
	if vd.Warning != "" {
		d.warnings = append(d.warnings, vd.Warning)
	}
	if vd.Modifier != nil {
		d.mods = append(d.mods, *vd.Modifier)
	}
	return d, nil
}

// netnsOf returns the network namespace the container will join when it
// exists already: the node's (the spec asks for none) or the path a CRI
// pod's sandbox made. A namespace runc is to create has no path yet.
func netnsOf(s *specs.Spec) (string, bool) {
	if s.Linux == nil {
		return "/proc/self/ns/net", true
	}
	for _, n := range s.Linux.Namespaces {
		if n.Type == specs.NetworkNamespace {
			return n.Path, n.Path != ""
		}
	}
	return "/proc/self/ns/net", true
}

// HookBinary is the hook binary's name (cmd/swift-hook).
const HookBinary = "swift-hook"

// hookPath is swift-hook on this node: hooks.path, else the one beside
// the shim's own binary. It must be an executable file that only root
// could have written or put there (trust.Check).
func hookPath(cfg config.Config) (string, error) {
	p := cfg.Hooks.Path
	key := "hooks.path"
	if p == "" {
		self, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find the shim's own binary (for %s beside it): %w", HookBinary, err)
		}
		p, key = filepath.Join(filepath.Dir(self), HookBinary), "hooks.path (unset: beside the shim)"
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s: %s is not an executable file (install %s with the shim, or set hooks.path): %w",
			key, p, HookBinary, errdefs.ErrFailedPrecondition)
	}
	// runc runs it as root for every opted-in container: nobody else may
	// write it or put another in its place (trust.Check)
	if _, err := trust.Check(p); err != nil {
		return "", fmt.Errorf("%s: %s must be owned by root and writable by no one else, nor may the directories on the way to it be: %w",
			key, p, err)
	}
	return p, nil
}

// heldUnderPolicy decides for a container that does not opt in: when it
// already holds RDMA devices (a CDI request, a device plugin, a
// privileged spec) and a tenant policy is in force, the devices go
// through the policy like an opt-in's, so it is opted in: the policy it
// read is returned, for the rest of the Create to use (one read per
// Create). An explicit swift.io/rdma=false is refused. Otherwise it is
// left alone (nil).
func heldUnderPolicy(ctx context.Context, spec *specs.Spec, cfg config.Config, opts annotations.Options) (*policy.Policy, error) {
	inv, err := rdma.Discover(cfg.RDMA.SysRoot, cfg.RDMA.DevRoot)
	if err != nil || len(inv.Devices) == 0 {
		return nil, nil // nothing of ours to police
	}
	held, err := inject.Allocated(spec, inv)
	if err != nil || len(held) == 0 {
		return nil, err
	}
	pol, err := policy.LoadNode(cfg)
	if err != nil {
		return nil, err
	}
	if pol.IsOpen() {
		return nil, nil
	}
	if opts.RDMA != nil {
		return nil, fmt.Errorf("the container holds RDMA devices (%s) but %s=false: under the tenant policy %s a container's RDMA devices are admitted, "+
			"limited and leased by it (drop the annotation): %w", strings.Join(held, ", "), annotations.RDMA, pol.Path, errdefs.ErrPermissionDenied)
	}
	log.G(ctx).WithField("devices", strings.Join(held, ",")).Info("swift: the container holds RDMA devices: opted in under the tenant policy")
	return pol, nil
}

// editBundle is EditBundle returning the lease it took (nil without a
// policy) and, for a zygote container, the tenant key to hand to its init
// once runc has made it (keyHandoff.start).
func editBundle(ctx context.Context, bundle, cfgPath string, node Node) (_ *leaseRef, _ *keyHandoff, retErr error) {
	path := filepath.Join(bundle, SpecFile)
	spec, err := readSpec(path)
	if err != nil {
		return nil, nil, err
	}
	if spec.Annotations[annotations.CRIContainerType] == "sandbox" {
		log.G(ctx).Debug("swift: sandbox container left as it is")
		return nil, nil, nil
	}
	opts, err := annotations.Parse(spec.Annotations)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, nil, err
	}
	if lvl := cfg.LogLevel; lvl != "" {
		_ = log.SetLevel(lvl)
	}
	var pol *policy.Policy // read by decide, unless already read here
	if !opts.Enabled(cfg.RDMA.Default) {
		if len(opts.Given) > 0 && opts.RDMA == nil {
			k := opts.Given[0]
			return nil, nil, fmt.Errorf("annotation %s=%q: given but the container does not opt in to RDMA (add %s=true): %w",
				k, spec.Annotations[k], annotations.RDMA, errdefs.ErrInvalidArgument)
		}
		if pol, err = heldUnderPolicy(ctx, spec, cfg, opts); err != nil || pol == nil {
			return nil, nil, err
		}
		on := true
		opts.RDMA = &on
	}
	d, err := decide(ctx, bundle, cfgPath, spec, cfg, pol, opts, node)
	if err != nil {
		return nil, nil, err
	}
	ten, zp := d.tenancy, d.zygote
	for _, w := range d.warnings {
		log.G(ctx).Warn("swift: " + w)
	}
	if err := inject.Apply(spec, d.mods); err != nil {
		return nil, nil, err
	}
	if err := validateSpec(spec); err != nil {
		return nil, nil, err
	}
	// Everything is checked: take the lease (against the tenant's node-wide
	// quota) before anything is written, and give it back if writing fails.
	var listen *ledger.Listen
	if zp != nil && zp.listen != nil {
		netns, err := listenNetNS(spec)
		if err != nil {
			return nil, nil, err
		}
		if netns != "" {
			listen = zp.listen
			listen.NetNS = netns
		}
	}
	uidRanges := 0
	if zp != nil && zp.ownUIDs {
		uidRanges = config.FunctionUIDRanges
	}
	lease, err := acquireLease(ctx, cfg, ten, bundle, listen, uidRanges)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if retErr != nil {
			lease.release(ctx)
		}
	}()
	if lease != nil {
		// the lease's copy in the bundle: what `swiftctl pools repair`
		// rebuilds a lost ledger from while the container exists
		b, err := json.Marshal(lease.lease)
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(bundle, ledger.BundleFile), b, 0o600); err != nil {
			return nil, nil, fmt.Errorf("write the lease's copy into the bundle: %w", err)
		}
	}
	if zp != nil {
		if lease != nil && lease.lease.UIDRange != nil {
			// the functions' uids: the container's own range of the node's
			zp.pool.FunctionUIDBase = cfg.Zygote.FunctionUIDBase + uint32(*lease.lease.UIDRange)*config.FunctionUIDs
		}
		if err := os.WriteFile(zp.mod.ConfPath, zp.pool.Render(), 0o444); err != nil {
			return nil, nil, fmt.Errorf("write pool description: %w", err)
		}
	}
	if err := writeSpecAtomic(path, spec); err != nil {
		if zp != nil {
			os.Remove(zp.mod.ConfPath)
		}
		return nil, nil, err
	}
	var key *keyHandoff
	if zp != nil {
		key = zp.key
	}
	log.G(ctx).WithField("devices", strings.Join(ten.devices, ",")).WithField("zygote", zp != nil).
		WithField("tenant", ten.tenant.Name).WithField("lease", lease != nil).Info("swift: rdma injected")
	return lease, key, nil
}

func readSpec(path string) (*specs.Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	var s specs.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse spec %s: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	return &s, nil
}

// validateSpec checks what the chain relies on and must leave consistent.
func validateSpec(s *specs.Spec) error {
	if s.Process == nil || s.Root == nil {
		return fmt.Errorf("spec lacks process or root: %w", errdefs.ErrInvalidArgument)
	}
	if s.Linux != nil {
		seen := map[string]bool{}
		for _, d := range s.Linux.Devices {
			if seen[d.Path] {
				return fmt.Errorf("spec lists device %s twice: %w", d.Path, errdefs.ErrInvalidArgument)
			}
			seen[d.Path] = true
		}
	}
	return nil
}

// writeSpecAtomic replaces path with s, keeping its mode (atomicfile).
func writeSpecAtomic(path string, s *specs.Spec) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat spec: %w", err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	return atomicfile.Write(path, data, fi.Mode().Perm())
}
