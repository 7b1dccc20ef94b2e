package shim

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/log"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/hooks"
	"github.com/swift-rdma/swift-containerd/inject"
	"github.com/swift-rdma/swift-containerd/internal/trust"
	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/metrics"
	"github.com/swift-rdma/swift-containerd/policy"
	"github.com/swift-rdma/swift-containerd/rdma"
	"github.com/swift-rdma/swift-containerd/verbs"
)

// A Create, top-down: Service.Create → prepare (the runtime options, the
// config path) → editBundle, which reads the request once
// (newCreateRequest: the spec, its annotations, the config, the node's
// devices), opts a container holding devices in under a policy (optIn),
// decides everything with no side effect (decide: the tenancy, the
// zygote, the modifier chain), and applies it (commit: the spec edit, the
// lease, the files). Then runc creates the container, and the zygote's
// keys are handed to its init.

// Create prepares the bundle's spec, converts runtime options, then
// delegates. Its outcome goes to the node agent's metrics (report), which
// never holds it up.
func (s *Service) Create(ctx context.Context, r *taskapi.CreateTaskRequest) (*taskapi.CreateTaskResponse, error) {
	start := time.Now()
	c, err := prepare(ctx, r)
	if err != nil {
		c.report(ctx, metrics.Report{Outcome: metrics.OutcomeRefused, Reason: metrics.Reason(err), Seconds: time.Since(start).Seconds()})
		log.G(ctx).WithError(err).WithField("id", r.ID).Error("swift: create refused")
		return nil, errgrpc.ToGRPC(err)
	}
	took := time.Since(start)
	log.G(ctx).WithField("id", r.ID).WithField("took", took).Debug("swift: spec prepared")
	resp, err := s.TTRPCTaskService.Create(ctx, r)
	if err != nil {
		c.report(ctx, metrics.Report{Outcome: metrics.OutcomeFailed, Reason: metrics.Reason(errgrpc.ToNative(err)), Seconds: took.Seconds()})
		c.lease.release(ctx) // runc did not create it: the lease goes back
		if c.key != nil {
			c.key.drop()
		}
		return resp, err
	}
	c.report(ctx, metrics.Report{Outcome: c.outcome, Seconds: took.Seconds()})
	if c.key != nil {
		// the container's init: runc's until Start, then swift-init
		c.key.start(ctx, r.ID, int(resp.Pid))
	}
	s.containers.add(r.ID, container{bundle: r.Bundle, lease: c.lease})
	return resp, nil
}

// created is what a Create's preparation did: its outcome for the
// metrics, the container's lease (nil without a policy) and a zygote's
// keys to hand over (nil for other containers).
type created struct {
	outcome string // metrics.OutcomeLeft, OutcomeInjected or OutcomeZygote
	// stateDir is the node's, once its config was read ("": the default
	// config's), where the agent's report socket is.
	stateDir string
	lease    *leaseRef
	key      *keyHandoff
}

// report hands r to the node agent, if one listens: a datagram that is
// dropped rather than waited for.
func (c *created) report(ctx context.Context, r metrics.Report) {
	dir := c.stateDir
	if dir == "" {
		dir = config.Default().StateDir
	}
	if err := metrics.Send(metrics.SocketPath(dir), r); err != nil {
		log.G(ctx).WithError(err).Debug("swift: create not reported to the node agent")
	}
}

// prepare converts the request's runtime options, finds the Swift config,
// and edits the bundle (editBundle). What it returns is never nil.
func prepare(ctx context.Context, r *taskapi.CreateTaskRequest) (*created, error) {
	ropts, err := ConvertOptions(r)
	if err != nil {
		return &created{}, err
	}
	cfgPath := ropts.SwiftConfig
	if cfgPath == "" {
		cfgPath = config.PathFromEnv()
	}
	if !filepath.IsAbs(r.Bundle) {
		return &created{}, fmt.Errorf("bundle path %q is not absolute: %w", r.Bundle, errdefs.ErrInvalidArgument)
	}
	return editBundle(ctx, r.Bundle, Node{CgroupRoot: "/sys/fs/cgroup", ConfigPath: cfgPath})
}

// Node says where editBundle finds the node's Swift config and cgroups.
type Node struct {
	// CgroupRoot is where cgroup hierarchies are mounted (/sys/fs/cgroup).
	CgroupRoot string
	// ConfigPath is the Swift config's path.
	ConfigPath string
}

// editBundle applies the Swift injection to bundle/config.json. Containers
// that do not opt in, and the CRI sandbox container, are left as they are.
// On error the file is unchanged and no lease is held. It returns, never
// nil, the outcome, the lease it took (nil without a policy; the task
// service gives it back at Delete, `swiftctl pools gc` once the container
// is gone) and, for a zygote container, its keys to hand to its init once
// runc has made it (keyHandoff.start).
func editBundle(ctx context.Context, bundle string, node Node) (c *created, retErr error) {
	c = &created{outcome: metrics.OutcomeLeft}
	req, err := newCreateRequest(ctx, bundle, node)
	if req != nil {
		c.stateDir = req.cfg.StateDir
	}
	if err != nil || req == nil {
		return c, err
	}
	if in, err := optIn(ctx, req); err != nil || !in {
		return c, err
	}
	defer func() {
		if retErr != nil && req.podLink != nil {
			req.podLink.Undo() // made by this Create, which failed
		}
		if req.unlockPodLinks != nil {
			req.unlockPodLinks()
		}
	}()
	if err := podDevice(ctx, req); err != nil {
		return c, err
	}
	d, err := decide(ctx, req)
	if err != nil {
		return c, err
	}
	lease, err := commit(ctx, req, d)
	if err != nil {
		return c, err
	}
	c.lease, c.outcome = lease, metrics.OutcomeInjected
	if d.zygote != nil {
		c.key, c.outcome = d.zygote.key, metrics.OutcomeZygote
	}
	log.G(ctx).WithField("devices", strings.Join(d.tenancy.devices, ",")).WithField("zygote", d.zygote != nil).
		WithField("tenant", d.tenancy.tenant.Name).WithField("lease", lease != nil).Info("swift: rdma injected")
	return c, nil
}

// createRequest is one Create as its steps see it, read once: the bundle
// and its spec, the spec's annotations, the node's config, policy and
// devices.
type createRequest struct {
	bundle string
	node   Node
	spec   *specs.Spec
	opts   annotations.Options
	cfg    config.Config
	// pol is the node's policy once this Create has read it (nil before).
	pol *policy.Policy
	// inv is the node's RDMA devices (invErr: why they could not be
	// listed); alloc those of them the spec holds already, from a device
	// plugin, CDI, DRA or NRI (nil: none; allocErr: a spec that holds
	// them wrongly).
	inv      rdma.Inventory
	invErr   error
	alloc    []string
	allocErr error
	// podLink is the pod's own soft-RoCE device (rdma.pod_softroce), nil
	// for other containers: alloc names it alone.
	podLink *hooks.PodLink
	// unlockPodLinks releases the lock podDevice took (nil: none taken).
	unlockPodLinks func()
}

// newCreateRequest reads bundle's spec, its annotations and the node's
// config, and lists the node's devices. A CRI sandbox container is left as
// it is: nil.
func newCreateRequest(ctx context.Context, bundle string, node Node) (*createRequest, error) {
	spec, err := readSpec(filepath.Join(bundle, SpecFile))
	if err != nil {
		return nil, err
	}
	if spec.Annotations[annotations.CRIContainerType] == "sandbox" {
		log.G(ctx).Debug("swift: sandbox container left as it is")
		return nil, nil
	}
	opts, err := annotations.Parse(spec.Annotations)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(node.ConfigPath)
	if err != nil {
		return nil, err
	}
	if lvl := cfg.LogLevel; lvl != "" {
		_ = log.SetLevel(lvl)
	}
	req := &createRequest{bundle: bundle, node: node, spec: spec, opts: opts, cfg: cfg}
	req.inv, req.invErr = rdma.Discover(cfg.RDMA.SysRoot, cfg.RDMA.DevRoot)
	// the devices made for pods (rdma.pod_softroce) are theirs alone: in
	// shared mode the node lists them too, and no other container may
	// have them
	req.inv = req.inv.Aside(hooks.IsPodLink)
	if req.invErr == nil {
		req.alloc, req.allocErr = inject.Allocated(spec, req.inv)
	}
	return req, nil
}

// optIn tells whether the container is Swift's. One that opts in is. One
// that does not but already holds RDMA devices (a CDI request, a device
// plugin, a privileged spec) while a tenant policy is in force is opted
// in, so its devices go through the policy like an opt-in's (the policy
// it read stays in req, one read per Create); an explicit
// swift.io/rdma=false then is refused. Any other is left alone. Swift
// annotations on a container that does not opt in are refused.
func optIn(ctx context.Context, req *createRequest) (bool, error) {
	opts := req.opts
	if opts.Enabled(req.cfg.RDMA.Default) {
		return true, nil
	}
	if len(opts.Given) > 0 && opts.RDMA == nil {
		k := opts.Given[0]
		return false, fmt.Errorf("annotation %s=%q: given but the container does not opt in to RDMA (add %s=true): %w",
			k, req.spec.Annotations[k], annotations.RDMA, errdefs.ErrInvalidArgument)
	}
	if req.invErr != nil || len(req.inv.Devices) == 0 {
		return false, nil // nothing of ours to police
	}
	if req.allocErr != nil || len(req.alloc) == 0 {
		return false, req.allocErr
	}
	pol, err := policy.LoadNode(req.cfg)
	if err != nil {
		return false, err
	}
	if pol.IsOpen() {
		return false, nil
	}
	if opts.RDMA != nil {
		return false, fmt.Errorf("the container holds RDMA devices (%s) but %s=false: under the tenant policy %s a container's RDMA devices are admitted, "+
			"limited and leased by it (drop the annotation): %w", strings.Join(req.alloc, ", "), annotations.RDMA, pol.Path, errdefs.ErrPermissionDenied)
	}
	log.G(ctx).WithField("devices", strings.Join(req.alloc, ",")).Info("swift: the container holds RDMA devices: opted in under the tenant policy")
	on := true
	req.pol, req.opts.RDMA = pol, &on
	return true, nil
}

// decision is everything Create decides for an opted-in container, with
// no side effect: the tenant and what it grants (the devices, the limits,
// the lease's charge), every spec edit (verbs included), the files to
// write (the zygote's pool description and key copy) and the warnings.
// commit only applies it.
type decision struct {
	tenancy  *tenancy
	mods     []inject.Modifier
	zygote   *zygotePrep // nil without a zygote here
	warnings []string
	notes    []string
}

// decide makes the decision for req.
func decide(ctx context.Context, req *createRequest) (*decision, error) {
	if req.invErr != nil {
		return nil, fmt.Errorf("discover RDMA devices: %w", req.invErr)
	}
	if req.allocErr != nil {
		return nil, req.allocErr
	}
	// Devices allocated before the shim are the container's devices:
	// nothing else is injected.
	inv := req.inv
	if req.alloc != nil {
		inv = inv.Only(req.alloc)
		log.G(ctx).WithField("allocated", strings.Join(req.alloc, ",")).Debug("swift: the spec holds RDMA devices: using those")
	}
	// The tenant policy: who the container belongs to, and what it may have.
	ten, err := decideTenancy(ctx, req, inv)
	if err != nil {
		return nil, err
	}
	opts, cfg := ten.opts, req.cfg
	hard, canRaise := rdma.MemlockLimits()
	verbsCache := verbs.Check(verbs.Node{StateDir: cfg.StateDir, Sources: verbs.Sources{SysRoot: cfg.RDMA.SysRoot}})
	in := inject.Node{
		Inventory: inv, Allocated: req.alloc != nil, RDMACgroup: rdma.CgroupAvailable(req.node.CgroupRoot),
		MemlockHard: hard, CanRaiseMemlock: canRaise,
		Limits: &ten.limits, Seccomp: ten.seccomp, DropCapabilities: ten.dropCaps, VerbsCache: &verbsCache,
	}
	hook, err := hookPath(cfg)
	if err != nil {
		return nil, err
	}
	// netcheck needs the container's network namespace: one that exists
	// already (the node's, a CRI pod's) is checked here, at once; a new
	// one only by the createRuntime hook, once runc made it
	nsPath, nsExists := netnsOf(req.spec)
	in.Hooks = &inject.Hooks{Path: hook, SysRoot: cfg.RDMA.SysRoot, ConfigPath: req.node.ConfigPath,
		NetCheck: cfg.Hooks.NetCheck && !nsExists, Move: cfg.Hooks.ExclusiveMove}
	d := &decision{tenancy: ten}
	if opts.Zygote != nil && *opts.Zygote && zygoteHere(req.spec, opts) {
		if d.zygote, err = prepareZygote(req, ten); err != nil {
			return nil, err
		}
		in.Zygote = d.zygote.mod
	}
	chain, err := inject.Plan(cfg, opts, in)
	if err != nil {
		return nil, err
	}
	d.mods, d.warnings, d.notes = chain.Mods, chain.Warnings, chain.Notes
	// a pod's own device was checked from its namespace when it was made
	if cfg.Hooks.NetCheck && nsExists && req.podLink == nil {
		if err := hooks.NetCheckAt(nsPath, cfg.RDMA.SysRoot, chain.Devices, cfg.Hooks.ExclusiveMove); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// zygoteHere tells whether this container runs the zygote asked for: in a
// pod whose annotations name a zygote container (they reach every
// container), only that one does; the others get RDMA without a zygote.
func zygoteHere(s *specs.Spec, o annotations.Options) bool {
	name := s.Annotations[annotations.CRIContainerName]
	return o.ZygoteContainer == "" || name == "" || name == o.ZygoteContainer
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

// commit applies d: it edits the spec and checks the result, takes the
// container's lease (against the tenant's node-wide quota) before anything
// is written, then writes the lease's copy, the zygote's pool description
// and the spec (config.json last, replaced whole). On error the lease goes
// back and the files it wrote go; config.json is as it was.
func commit(ctx context.Context, req *createRequest, d *decision) (_ *leaseRef, retErr error) {
	for _, w := range d.warnings {
		log.G(ctx).Warn("swift: " + w)
	}
	for _, n := range d.notes {
		log.G(ctx).Info("swift: " + n)
	}
	spec, zp := req.spec, d.zygote
	if err := inject.Apply(spec, d.mods); err != nil {
		return nil, err
	}
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	lease, err := acquireLease(ctx, req, d)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil && lease != nil {
			os.Remove(filepath.Join(req.bundle, ledger.BundleFile))
			lease.release(ctx)
		}
	}()
	if lease != nil {
		// the lease's copy in the bundle: what `swiftctl pools repair`
		// rebuilds a lost ledger from while the container exists
		b, err := json.Marshal(lease.lease)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(req.bundle, ledger.BundleFile), b, 0o600); err != nil {
			return nil, fmt.Errorf("write the lease's copy into the bundle: %w", err)
		}
	}
	if zp != nil {
		if lease != nil && lease.lease.UIDRange != nil {
			// the functions' uids: the container's own range of the node's
			zp.pool.FunctionUIDBase = req.cfg.Zygote.FunctionUIDBase + uint32(*lease.lease.UIDRange)*config.FunctionUIDs
		}
		if err := os.WriteFile(zp.mod.ConfPath, zp.pool.Render(), 0o444); err != nil {
			return nil, fmt.Errorf("write pool description: %w", err)
		}
	}
	if err := writeSpecAtomic(filepath.Join(req.bundle, SpecFile), spec); err != nil {
		if zp != nil {
			os.Remove(zp.mod.ConfPath)
		}
		return nil, err
	}
	return lease, nil
}
