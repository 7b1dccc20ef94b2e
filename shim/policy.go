package shim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/log"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
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
// request against the tenant. It has no side effects.
//
// With allocated, inv holds only the devices allocated to the container:
// each must be the tenant's, the lease and its charge count them all, and
// without swift.io/devices the zygote and SWIFT_RDMA_DEVICES use them all.
//
// pol is the node's policy when this Create read it already; nil loads it.
func decideTenancy(ctx context.Context, bundle string, spec *specs.Spec, cfg config.Config, pol *policy.Policy, opts annotations.Options, inv rdma.Inventory, allocated bool) (*tenancy, error) {
	if pol == nil {
		var err error
		if pol, err = policy.LoadNode(cfg); err != nil {
			return nil, err
		}
	}
	ns, _ := containerKey(ctx, bundle)
	caller := policy.CallerOf(ns, cfg.CRINamespace, spec.Annotations)
	t, err := pol.Resolve(caller, opts.Tenant)
	if err != nil {
		return nil, err
	}
	if allocated {
		if err := t.AdmitAllocated(inv.Names()); err != nil {
			return nil, err
		}
	}
	d, err := t.Admit(opts, inv.Names())
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

// leaseRef names a lease the shim holds in the node's ledger.
type leaseRef struct {
	lease     ledger.Lease
	ledger    *ledger.Ledger
	namespace string
	id        string
	owner     ledger.Owner
}

// containerKey returns the containerd namespace and ID of the container
// whose bundle is bundle (.../io.containerd.runtime.v2.task/NS/ID).
func containerKey(ctx context.Context, bundle string) (string, string) {
	ns, ok := namespaces.Namespace(ctx)
	if !ok || ns == "" {
		ns = filepath.Base(filepath.Dir(bundle))
	}
	return ns, filepath.Base(bundle)
}

// acquireLease records the container's lease against its tenant's
// node-wide quota, and the port its zygote listens on (listen, nil for
// none) against every other zygote's. The open policy (no policy file)
// keeps no ledger.
func acquireLease(ctx context.Context, cfg config.Config, ten *tenancy, bundle string, listen *ledger.Listen, uidRanges int) (*leaseRef, error) {
	if ten.policy.IsOpen() {
		return nil, nil
	}
	ns, id := containerKey(ctx, bundle)
	t := ten.tenant
	l := ledger.New(cfg.StateDir)
	owner := ledger.Self()
	lease := ledger.Lease{Namespace: ns, ID: id, Tenant: t.Name, Devices: ten.devices, Charge: ten.charge,
		Bundle: bundle, Owner: owner, Listen: listen}
	q := ledger.Quota{
		Limit:     t.Node.Amounts(),
		Source:    fmt.Sprintf("%s in %s", t.Key("node"), ten.policy.Path),
		UIDRanges: uidRanges,
	}
	lease, reclaimed, err := l.Acquire(lease, q)
	for _, r := range reclaimed {
		log.G(ctx).WithField("lease", r.Key()).WithField("tenant", r.Tenant).WithField("shim_pid", r.Owner.PID).
			Info("swift: reclaimed the lease of a container that no longer exists")
	}
	var pe *ledger.PortError
	if errors.As(err, &pe) {
		log.G(ctx).WithField("lease", ns+"/"+id).WithField("holder", pe.Holder).WithField("listen", pe.Want.String()).
			Warn("swift: refused a zygote whose exchange port another zygote of the node holds")
	}
	if err != nil {
		return nil, err
	}
	return &leaseRef{lease: lease, ledger: l, namespace: ns, id: id, owner: owner}, nil
}

// release gives the lease back; errors are logged (gc reclaims it later).
func (r *leaseRef) release(ctx context.Context) {
	if r == nil {
		return
	}
	if _, err := r.ledger.Release(r.namespace, r.id, &r.owner); err != nil {
		log.G(ctx).WithError(err).WithField("lease", r.namespace+"/"+r.id).
			Warn("swift: could not release lease; `swiftctl pools gc` reclaims it once the container is gone")
	}
}

// leases remembers the lease of each container this shim serves.
type leases struct {
	mu sync.Mutex
	m  map[string]*leaseRef
}

func (l *leases) set(id string, r *leaseRef) {
	if r == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*leaseRef{}
	}
	l.m[id] = r
}

func (l *leases) take(id string) *leaseRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.m[id]
	delete(l.m, id)
	return r
}
