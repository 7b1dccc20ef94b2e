package shim

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/inject"
	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/policy"
	"github.com/swift-rdma/swift-containerd/rdma"
	"github.com/swift-rdma/swift-containerd/seccomp"
)

// tenancy is what the tenant policy decides for one opted-in container.
type tenancy struct {
	policy *policy.Policy
	tenant *policy.Tenant
	// caller is who asks for the container: a pod of a namespace, or a
	// local caller.
	caller policy.Caller
	// opts are the container's options with the tenant resolved and the
	// devices defaulted to the tenant's.
	opts    annotations.Options
	limits  inject.Limits
	seccomp *inject.Seccomp
	// dropCaps takes the network capabilities the tenant does not keep
	// (nil under the open policy).
	dropCaps *inject.DropCapabilities
	devices  []string // the device names injected
	charge   ledger.Amounts
	qpLimit  uint64 // the zygote's QP limit (0: none)
}

// decideTenancy loads the policy (fail closed: a malformed one is an
// error), resolves the container's tenant from its caller, and checks its
// request against the tenant. It changes nothing outside req (where it
// keeps the policy it loaded).
//
// inv is the devices the container may have: the node's, or only those
// allocated to it (req.alloc). Allocated devices must each be the
// tenant's, the lease and its charge count them all, and without
// swift.io/devices the zygote and SWIFT_RDMA_DEVICES use them all.
//
// The policy is req.pol when this Create read it already; else it is
// loaded (and kept in req).
func decideTenancy(ctx context.Context, req *createRequest, inv rdma.Inventory) (*tenancy, error) {
	if req.pol == nil {
		pol, err := policy.LoadNode(req.cfg)
		if err != nil {
			return nil, err
		}
		req.pol = pol
	}
	pol, cfg, opts, allocated := req.pol, req.cfg, req.opts, req.alloc != nil
	ns, _ := containerKey(ctx, req.bundle)
	caller := policy.CallerOf(ns, cfg.CRINamespace, req.spec.Annotations)
	t, err := pol.Resolve(caller, opts.Tenant)
	if err != nil {
		return nil, err
	}
	if allocated {
		names := inv.Names()
		if req.podLink != nil {
			// the pod's own device is admitted as the node's device on
			// its interface's parent would be
			names = []string{req.podLink.StandsFor}
			if req.podLink.StandsFor == "" {
				names = []string{req.podLink.Name + " (on " + req.podLink.Netdev + ", over no node device)"}
			}
		}
		if err := t.AdmitAllocated(names); err != nil {
			if req.podLink != nil {
				return nil, fmt.Errorf("the pod's own device %s (on its %s) is admitted as the node device under it: %w", req.podLink.Name, req.podLink.Netdev, err)
			}
			return nil, err
		}
	}
	admit := t
	if req.podLink != nil {
		// admitted above by the node device it stands for: the rest of
		// the request is the tenant's to judge, not the device's name
		own := *t
		own.Devices = nil
		admit = &own
	}
	d, err := admit.Admit(opts, inv.Names())
	if err != nil {
		return nil, err
	}
	opts.Tenant = t.Name
	if d.Devices != nil {
		opts.Devices = d.Devices
	}
	lim := inject.ConfigLimits(cfg)
	if t.Container.HCAHandle != 0 {
		lim.HCAHandle = t.Container.HCAHandle
	}
	switch {
	case t.Container.HCAObject != 0:
		lim.HCAObject = t.Container.HCAObject
	case t.Container.QPs != 0:
		// a QP quota bounds verbs objects too, for QPs made outside the
		// zygote's count: the charge times what a QP costs
		lim.HCAObject = uint32(min(t.Container.QPs*policy.ObjectsPerQP, math.MaxUint32))
	}
	if t.Container.Memlock != 0 && t.Container.Memlock < lim.Memlock {
		lim.Memlock, lim.MemlockKey, lim.MemlockText = t.Container.Memlock, t.Key("container.memlock"), ""
	}
	ten := &tenancy{policy: pol, tenant: t, caller: caller, opts: opts, limits: lim, devices: opts.Devices, qpLimit: d.QPLimit}
	if len(ten.devices) == 0 || allocated {
		ten.devices = inv.Names()
	}
	if allocated && len(ten.opts.Devices) == 0 {
		ten.opts.Devices = inv.Names()
	}
	if t.Seccomp == policy.SeccompBaseline {
		ten.seccomp = &inject.Seccomp{Level: seccomp.Baseline}
	}
	if !pol.IsOpen() {
		var drop []string
		for _, c := range policy.NetCapabilities {
			if !slices.Contains(t.NetCapabilities, c) {
				drop = append(drop, c)
			}
		}
		if len(drop) > 0 {
			ten.dropCaps = &inject.DropCapabilities{Caps: drop}
		}
	}
	n := uint64(len(ten.devices))
	ten.charge = ledger.Amounts{Containers: 1, QPs: d.QPs,
		HCAHandle: uint64(lim.HCAHandle) * n, HCAObject: uint64(lim.HCAObject) * n, Memlock: lim.Memlock}
	return ten, nil
}
