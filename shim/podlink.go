package shim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/hooks"
	"github.com/swift-rdma/swift-containerd/internal/lockfile"
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
	// one Create at a time makes, reuses or undoes a pod's device, up to
	// the end of its own (editBundle releases it): a Create that fails
	// and deletes the device it made cannot pull it from under another
	// container of the pod that took it meanwhile
	unlock, err := lockPodLinks(req.cfg.StateDir)
	if err != nil {
		return err
	}
	req.unlockPodLinks = unlock
	link, err := hooks.EnsurePodLink(nsPath, v, req.cfg.RDMA.SysRoot)
	if err != nil {
		return err
	}
	req.podLink = &link
	inv, err := rdma.Discover(req.cfg.RDMA.SysRoot, req.cfg.RDMA.DevRoot)
	if err != nil {
		return fmt.Errorf("discover RDMA devices: %w", err)
	}
	pod, ok := inv.Aside(hooks.IsPodLink).PodDevice(link.Name)
	if !ok {
		return fmt.Errorf("rdma.pod_softroce: the pod's device %s has no uverbs node on this node: %w", link.Name, errdefs.ErrFailedPrecondition)
	}
	req.inv, req.alloc = pod, []string{link.Name}
	log.G(ctx).WithField("device", link.Name).WithField("netdev", link.Netdev).WithField("created", link.Created).
		WithField("moved", link.Moved).WithField("stands_for", link.StandsFor).Info("swift: the pod's own soft-RoCE device")
	return nil
}

// PodLinksLock is the lock file, in the state directory, that serializes
// the Creates that make or use pods' own devices.
const PodLinksLock = "podlinks.lock"

// podLinksWait bounds the wait for that lock: the holder is another
// Create, which takes seconds at most.
const podLinksWait = 30 * time.Second

// lockPodLinks takes PodLinksLock under stateDir and returns its release.
func lockPodLinks(stateDir string) (func(), error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("rdma.pod_softroce: state directory %s: %w", stateDir, err)
	}
	p := filepath.Join(stateDir, PodLinksLock)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("rdma.pod_softroce: open %s: %w", p, err)
	}
	if err := lockfile.Flock(f, unix.LOCK_EX, time.Now().Add(podLinksWait)); err != nil {
		f.Close()
		return nil, fmt.Errorf("rdma.pod_softroce: lock %s: %w: %w", p, err, errdefs.ErrUnavailable)
	}
	return func() { f.Close() }, nil // closing releases it
}
