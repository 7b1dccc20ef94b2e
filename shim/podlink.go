package shim

import (
	"context"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/swift-rdma/swift-containerd/hooks"
	"github.com/swift-rdma/swift-containerd/rdma"
)

// podDevice gives an opted-in pod container with a network namespace of
// its own its pod's soft-RoCE device (rdma.pod_softroce): the device is
// made on the pod's interface at the pod's first opted-in Create
// (hooks.EnsurePodLink) and is then the container's only device, as if
// allocated to it, so that its lease, limits and tenant policy apply as to
// any allocated device. A container on the node's network, or in a
// namespace runc is to make (no pod's), keeps the node's devices.
func podDevice(ctx context.Context, req *createRequest) error {
	if !req.cfg.RDMA.PodSoftRoCE {
		return nil
	}
	nsPath, exists := netnsOf(req.spec)
	if !exists {
		return nil
	}
	v, err := hooks.ViewOf(nsPath)
	if err != nil {
		return err
	}
	if v.Host {
		return nil
	}
	if req.invErr != nil {
		return fmt.Errorf("discover RDMA devices: %w", req.invErr)
	}
	if req.allocErr != nil {
		return req.allocErr
	}
	if len(req.alloc) > 0 {
		return fmt.Errorf("rdma.pod_softroce: the container already holds RDMA devices (%s) from a device plugin, CDI or DRA, "+
			"and a pod on its own network gets its own soft-RoCE device instead: allocate no RDMA device to it: %w",
			strings.Join(req.alloc, ", "), errdefs.ErrInvalidArgument)
	}
	link, err := hooks.EnsurePodLink(nsPath, req.cfg.RDMA.SysRoot)
	if err != nil {
		return err
	}
	req.podLink = &link
	inv, err := rdma.Discover(req.cfg.RDMA.SysRoot, req.cfg.RDMA.DevRoot)
	if err != nil {
		return fmt.Errorf("discover RDMA devices: %w", err)
	}
	pod, ok := inv.PodDevice(link.Name)
	if !ok {
		return fmt.Errorf("rdma.pod_softroce: the pod's device %s has no uverbs node on this node: %w", link.Name, errdefs.ErrFailedPrecondition)
	}
	req.inv, req.alloc = pod, []string{link.Name}
	log.G(ctx).WithField("device", link.Name).WithField("netdev", link.Netdev).WithField("created", link.Created).
		WithField("moved", link.Moved).WithField("stands_for", link.StandsFor).Info("swift: the pod's own soft-RoCE device")
	return nil
}
