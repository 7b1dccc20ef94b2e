package shim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/log"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/ledger"
)

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
// node-wide quota, with the exchange port its zygote listens on (if it
// has peers) against every other zygote's in the same network namespace,
// and a function uid range of its own when its functions run under host
// uids. The open policy (no policy file) keeps no ledger.
func acquireLease(ctx context.Context, req *createRequest, d *decision) (*leaseRef, error) {
	var listen *ledger.Listen
	uidRanges := 0
	if zp := d.zygote; zp != nil {
		if zp.listen != nil {
			netns, err := listenNetNS(req.spec)
			if err != nil {
				return nil, err
			}
			if netns != "" {
				listen = zp.listen
				listen.NetNS = netns
			}
		}
		if zp.ownUIDs {
			uidRanges = config.FunctionUIDRanges
		}
	}
	ten := d.tenancy
	if ten.policy.IsOpen() {
		return nil, nil
	}
	bundle := req.bundle
	ns, id := containerKey(ctx, bundle)
	t := ten.tenant
	l := ledger.New(req.cfg.StateDir)
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
