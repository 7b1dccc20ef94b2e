package inject

import (
	"fmt"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/rdma"
	"github.com/swift-rdma/swift-containerd/verbs"
)

// EnvDevices names the variable that tells a workload its RDMA devices.
const EnvDevices = "SWIFT_RDMA_DEVICES"

// Node is what Plan knows of the node besides its config.
type Node struct {
	Inventory rdma.Inventory
	// Allocated tells that Inventory holds only the devices allocated to
	// the container (Allocated): swift.io/devices may name a subset of
	// them, and the rdma limits cover them all, as the container can open
	// every one.
	Allocated bool
	// RDMACgroup tells whether the rdma cgroup controller is available;
	// without it runc refuses linux.resources.rdma, so limits are left out.
	RDMACgroup bool
	// MemlockHard is the hard RLIMIT_MEMLOCK the runtime runs with, and
	// CanRaiseMemlock tells whether it holds CAP_SYS_RESOURCE to go past it.
	// runc sets the container's limit from a process with the same limits
	// and capabilities, so a limit above MemlockHard without the capability
	// would fail deep inside runc; Plan refuses it up front instead.
	MemlockHard     uint64
	CanRaiseMemlock bool
	// Hooks, when set, adds swift-hook (Plan names the devices).
	Hooks *Hooks
	// Zygote, when set, makes swift-init the container's init.
	Zygote *Zygote
	// Limits, when set, replaces the node config's per-container limits
	// (the tenant policy's, merged with the config's by the caller).
	Limits *Limits
	// DropCapabilities, when set, takes the capabilities it names from
	// the container's process (the tenant policy's network capabilities).
	DropCapabilities *DropCapabilities
	// Seccomp, when set, adds the tenant's seccomp denials.
	Seccomp *Seccomp
	// VerbsCache, when set, is the node's verbs cache as verbs.Check found
	// it: the container's swift.io/verbs and it decide its verbs mode
	// (DecideVerbs), the last modifier of the chain.
	VerbsCache *verbs.Result
}

// Chain is a container's plan: the modifiers in the order of the package
// doc, what was left out and why (Warnings, for the caller's log), and the
// names of the devices injected (what a netcheck checks).
type Chain struct {
	Mods     []Modifier
	Warnings []string
	Notes    []string // what was decided and why, for the caller's log
	Devices  []string
}

// Limits are the per-container limits Plan writes into the spec.
type Limits struct {
	HCAHandle uint32 // linux.resources.rdma hcaHandles per device; 0: none
	HCAObject uint32 // linux.resources.rdma hcaObjects per device; 0: none
	Memlock   uint64 // RLIMIT_MEMLOCK (config.MemlockUnlimited: unlimited)
	// MemlockKey and MemlockText say where Memlock comes from and how it
	// was written there, for errors.
	MemlockKey, MemlockText string
}

// ConfigLimits returns the node config's per-container limits.
func ConfigLimits(cfg config.Config) Limits {
	return Limits{HCAHandle: uint32(cfg.RDMA.HCAHandle), HCAObject: uint32(cfg.RDMA.HCAObject),
		Memlock: cfg.MemlockBytes(), MemlockKey: "rdma.memlock", MemlockText: cfg.RDMA.Memlock}
}

// Plan validates a container's request against the node and returns its
// chain, in the order the package doc gives (hooks, zygote, capabilities,
// seccomp and verbs only when node asks for them).
func Plan(cfg config.Config, opts annotations.Options, node Node) (Chain, error) {
	var mods []Modifier
	var warnings []string
	inv := node.Inventory
	if len(inv.Devices) == 0 {
		return Chain{}, fmt.Errorf("container opts in to RDMA but this node has no RDMA devices (none under %s/sys/class/infiniband_verbs): %w",
			strings.TrimSuffix(cfg.RDMA.SysRoot, "/"), errdefs.ErrFailedPrecondition)
	}
	devices := inv.Devices
	if len(opts.Devices) > 0 {
		devices = nil
		for _, name := range opts.Devices {
			d, ok := inv.Device(name)
			if !ok && node.Allocated {
				return Chain{}, fmt.Errorf("annotation %s: device %q is not among the devices allocated to the container (allocated: %s): %w",
					annotations.Devices, name, strings.Join(inv.Names(), ", "), errdefs.ErrInvalidArgument)
			}
			if !ok {
				return Chain{}, fmt.Errorf("annotation %s: device %q is not present on this node (present: %s): %w",
					annotations.Devices, name, strings.Join(inv.Names(), ", "), errdefs.ErrInvalidArgument)
			}
			devices = append(devices, d)
		}
	}
	var nodes []rdma.Node
	var names []string
	for _, d := range devices {
		nodes = append(nodes, d.Uverbs)
		names = append(names, d.Name)
	}
	if inv.RDMACM != nil {
		nodes = append(nodes, *inv.RDMACM)
	}
	mods = append(mods, Devices{Nodes: nodes})

	lim := ConfigLimits(cfg)
	if node.Limits != nil {
		lim = *node.Limits
	}
	if lim.HCAHandle != 0 || lim.HCAObject != 0 {
		limited := names
		if node.Allocated {
			limited = inv.Names()
		}
		if node.RDMACgroup {
			mods = append(mods, RDMALimits{Devices: limited, HCAHandle: lim.HCAHandle, HCAObject: lim.HCAObject})
		} else {
			warnings = append(warnings, "rdma cgroup controller not available on this node: rdma.hca_handle/hca_object limits not applied")
		}
	}
	memlock := lim.Memlock
	if memlock > node.MemlockHard && !node.CanRaiseMemlock {
		text := lim.MemlockText
		if text == "" {
			text = config.FormatBytes(memlock)
		}
		return Chain{}, fmt.Errorf("%s = %q is above the hard RLIMIT_MEMLOCK of the runtime (%s) and it lacks CAP_SYS_RESOURCE to raise it: "+
			"set %s to at most %s, or run containerd with CAP_SYS_RESOURCE (or LimitMEMLOCK=infinity): %w",
			lim.MemlockKey, text, config.FormatBytes(node.MemlockHard), lim.MemlockKey, config.FormatBytes(node.MemlockHard), errdefs.ErrFailedPrecondition)
	}
	mods = append(mods, Memlock{Bytes: memlock})

	env := map[string]string{EnvDevices: strings.Join(names, ",")}
	for k, v := range cfg.RDMA.Env {
		env[k] = v
	}
	mods = append(mods, Env{Vars: env})
	if node.Hooks != nil {
		h := *node.Hooks
		h.Devices = names
		mods = append(mods, h)
	}
	if node.Zygote != nil {
		mods = append(mods, *node.Zygote)
	}
	if node.DropCapabilities != nil {
		mods = append(mods, *node.DropCapabilities)
	}
	if node.Seccomp != nil {
		mods = append(mods, *node.Seccomp)
	}
	var notes []string
	if node.VerbsCache != nil {
		vd := DecideVerbs(opts.Verbs, *node.VerbsCache)
		if vd.Warning != "" {
			warnings = append(warnings, vd.Warning)
		}
		if vd.Note != "" {
			notes = append(notes, vd.Note)
		}
		if vd.Modifier != nil {
			mods = append(mods, *vd.Modifier)
		}
	}
	return Chain{Mods: mods, Warnings: warnings, Notes: notes, Devices: names}, nil
}
