// Package hooks is the work the shim leaves to OCI runtime hooks of an
// opted-in container (the swift-hook binary), because it needs the
// container's namespaces, which exist only once runc made them:
//
//   - netcheck (createRuntime): from inside the container's network
//     namespace, every device it was given has an ACTIVE port and a GID
//     for the namespace's addresses (soft-RoCE: and its UDP socket there);
//     in RDMA netns exclusive mode the device is moved into the namespace
//     (soft-RoCE only from Linux 7.1 on). A failure fails the container's
//     Create with the reason, before any process of it runs.
//   - release (poststop): the container's lease is given back if the shim
//     that took it did not (a backstop; releasing twice is harmless).
//
// Both are idempotent and read their input from the container state runc
// passes on stdin.
//
// The shim itself uses the same checks at Create for a namespace that
// exists already (NetCheckAt), and makes a pod's own soft-RoCE device in
// the pod's namespace (EnsurePodLink, rdma.pod_softroce).
package hooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/ledger"
)

// ReadState decodes the container state a runtime hook gets on stdin.
func ReadState(r io.Reader) (specs.State, error) {
	var st specs.State
	b, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return st, fmt.Errorf("read the container state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("the container state on stdin is not JSON: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if st.ID == "" || st.Bundle == "" {
		return st, fmt.Errorf("the container state names no id or bundle: %w", errdefs.ErrInvalidArgument)
	}
	return st, nil
}

// ViewOf returns the network namespace at path (a /proc/PID/ns/net, or
// a CRI pod's /var/run/netns/... bind mount) as the checks see it.
func ViewOf(path string) (NetView, error) {
	var v NetView
	var st, self unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return v, fmt.Errorf("the container's network namespace %s: %w: %w", path, err, errdefs.ErrFailedPrecondition)
	}
	// only a namespace file is opened (a FIFO named here would block)
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil || fs.Type != unix.NSFS_MAGIC {
		return v, fmt.Errorf("the container's network namespace %s is not a namespace file: %w", path, errdefs.ErrInvalidArgument)
	}
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		return v, fmt.Errorf("this process's network namespace: %w", err)
	}
	v.Host = st.Ino == self.Ino && st.Dev == self.Dev
	v.Name = fmt.Sprintf("net:[%d]", st.Ino)
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return v, fmt.Errorf("open %s: %w", path, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return v, fmt.Errorf("netlink in %s: %w", v.Name, err)
	}
	defer h.Close()
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return v, fmt.Errorf("addresses of %s: %w", v.Name, err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			v.Addrs = append(v.Addrs, ip)
		}
	}
	v.RoCESocket, err = roceSocketIn(ns)
	if err != nil {
		return v, fmt.Errorf("sockets of %s: %w", v.Name, err)
	}
	return v, nil
}

// roceSocketIn tells whether a UDP socket is bound to RoCEPort in ns: its
// /proc/net/udp{,6}, read from inside ns (inNetns).
func roceSocketIn(ns netns.NsHandle) (bool, error) {
	found := false
	err := inNetns(ns, func() error {
		for _, f := range []string{"udp", "udp6"} {
			b, _ := os.ReadFile("/proc/thread-self/net/" + f)
			found = found || UDPBound(string(b), RoCEPort)
		}
		return nil
	})
	return found, err
}

// inNetns runs f on a thread that entered ns and returns to its own
// namespace after; the thread is given back only once it is home. A
// thread left in ns (its return failed) stays locked and ends with the
// goroutine, except the main thread, which Go keeps, and whose namespace
// is what /proc/self/ns/net names (ViewOf's "the node's"): so it is never
// given back elsewhere.
func inNetns(ns netns.NsHandle, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer home.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		ferr := f()
		if err := netns.Set(home); err != nil {
			done <- fmt.Errorf("return to this process's network namespace: %w", err) // stays locked
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// NetCheck is the createRuntime hook: devices (by name, under sysRoot)
// checked from the network namespace of the container's init (st.Pid).
// In exclusive mode the devices are moved into that namespace only with
// move (they were allocated to this container: its own); a failure moves
// back what was moved.
func NetCheck(st specs.State, sysRoot string, devices []string, move bool) error {
	if st.Pid <= 0 {
		return fmt.Errorf("the container state has no pid (netcheck runs as a createRuntime hook): %w", errdefs.ErrInvalidArgument)
	}
	return NetCheckAt(fmt.Sprintf("/proc/%d/ns/net", st.Pid), sysRoot, devices, move)
}

// NetCheckAt is NetCheck for the network namespace at nsPath: the shim
// runs it itself when the namespace exists before the container does (the
// node's, or a CRI pod's), and leaves it to the hook otherwise.
func NetCheckAt(nsPath, sysRoot string, devices []string, move bool) (retErr error) {
	v, err := ViewOf(nsPath)
	if err != nil {
		return err
	}
	exclusive := false
	if mode, err := netlink.RdmaSystemGetNetnsMode(); err == nil && mode == "exclusive" {
		exclusive = true
	}
	var moved []Device
	defer func() {
		if retErr != nil {
			for _, d := range moved {
				if err := moveBack(d, nsPath); err != nil {
					retErr = fmt.Errorf("%w (and device %s could not be moved back to the node's network namespace: %v; the kernel returns it when %s ends)",
						retErr, d.Name, err, v.Name)
				}
			}
		}
	}()
	for _, name := range devices {
		d, err := ReadDevice(sysRoot, name)
		if err != nil {
			return err
		}
		if exclusive && !v.Host {
			if err := moveInto(d, nsPath, v, move); err != nil {
				return err
			}
			moved = append(moved, d)
		}
		if err := CheckNet(d, v); err != nil {
			return err
		}
	}
	return nil
}

// moveInto moves d into the network namespace at nsPath, as RDMA netns
// exclusive mode requires for the container to see it; the kernel gives
// it back to the node's namespace when that namespace ends. Whether the
// device can move is the kernel's to say: soft-RoCE could not before
// Linux 7.1 (it lacked disassociate_ucontext), and can there.
func moveInto(d Device, nsPath string, v NetView, move bool) error {
	if !move {
		return fmt.Errorf("RDMA network namespace mode is exclusive, and this node does not move devices into containers' network namespaces "+
			"(hooks.exclusive_move = false): device %s cannot reach %s; set it where every RDMA container's devices are allocated to it alone: %w",
			d.Name, v.Name, errdefs.ErrFailedPrecondition)
	}
	link, err := netlink.RdmaLinkByName(d.Name)
	if err != nil {
		return fmt.Errorf("exclusive mode: device %s is not in the node's network namespace (moved into another?): %v: %w", d.Name, err, errdefs.ErrFailedPrecondition)
	}
	f, err := os.Open(nsPath)
	if err != nil {
		return fmt.Errorf("exclusive mode: open the container's network namespace: %w", err)
	}
	defer f.Close()
	if err := netlink.RdmaLinkSetNsFd(link, uint32(f.Fd())); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) && d.Soft {
			return fmt.Errorf("RDMA network namespace mode is exclusive, and device %s is soft-RoCE (rxe), which this kernel cannot move into "+
				"the container's network namespace %s (%v; Linux 7.1 and later can): use shared mode (rdma system set netns shared) or a newer kernel: %w",
				d.Name, v.Name, err, errdefs.ErrFailedPrecondition)
		}
		return fmt.Errorf("exclusive mode: move device %s into the container's network namespace %s: %v: %w", d.Name, v.Name, err, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// moveBack returns d to the node's network namespace (this process's),
// undoing moveInto after a later failure: the device is named from the
// container's namespace (nsPath), where it is now; best effort (the
// kernel returns it when that namespace ends).
func moveBack(d Device, nsPath string) error {
	home, err := os.Open("/proc/self/ns/net")
	if err != nil {
		return err
	}
	defer home.Close()
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return err
	}
	defer ns.Close()
	// the kernel moves a device only for a caller in the device's
	// namespace, asking through a socket there
	return inNetns(ns, func() error {
		h, err := netlink.NewHandle(unix.NETLINK_RDMA)
		if err != nil {
			return err
		}
		defer h.Close()
		link, err := h.RdmaLinkByName(d.Name)
		if err != nil {
			return fmt.Errorf("find it in %s: %w", nsPath, err)
		}
		return h.RdmaLinkSetNsFd(link, uint32(home.Fd()))
	})
}

// Release is the poststop hook: the lease of the container (st.ID in the
// containerd namespace its bundle path names) is given back, if it is
// still recorded for this very bundle.
func Release(cfgPath string, st specs.State) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	l := ledger.New(cfg.StateDir)
	l.Timeout = ReleaseLockTimeout
	if _, err := os.Stat(l.Path); os.IsNotExist(err) {
		return nil // no policy, no ledger
	}
	_, err = l.ReleaseBundle(filepath.Base(filepath.Dir(st.Bundle)), st.ID, st.Bundle)
	return err
}

// ReleaseLockTimeout bounds release's wait for the ledger's lock, well
// inside the hook's own time-out.
const ReleaseLockTimeout = 5 * time.Second
