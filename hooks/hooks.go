// Package hooks is the work the shim leaves to OCI runtime hooks of an
// opted-in container (the swift-hook binary), because it needs the
// container's namespaces, which exist only once runc made them:
//
//   - netcheck (createRuntime): from inside the container's network
//     namespace, every device it was given has an ACTIVE port and a GID
//     for the namespace's addresses (soft-RoCE: and its UDP socket there);
//     in RDMA netns exclusive mode the device is moved into the namespace,
//     which soft-RoCE cannot be. A failure fails the container's Create
//     with the reason, before any process of it runs.
//   - release (poststop): the container's lease is given back if the shim
//     that took it did not (a backstop; releasing twice is harmless).
//
// Both are idempotent and read their input from the container state runc
// passes on stdin.
package hooks

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
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

// ViewOf returns the network namespace of process pid as the checks see it.
func ViewOf(pid int) (NetView, error) {
	var v NetView
	path := fmt.Sprintf("/proc/%d/ns/net", pid)
	var st, self unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return v, fmt.Errorf("network namespace of the container's process %d: %w: %w", pid, err, errdefs.ErrFailedPrecondition)
	}
	if err := unix.Stat("/proc/self/ns/net", &self); err != nil {
		return v, fmt.Errorf("this process's network namespace: %w", err)
	}
	v.Host = st.Ino == self.Ino && st.Dev == self.Dev
	v.Name, _ = os.Readlink(path)
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
	for _, f := range []string{"udp", "udp6"} {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if UDPBound(string(b), RoCEPort) {
			v.RoCESocket = true
		}
	}
	return v, nil
}

// NetCheck is the createRuntime hook: devices (by name, under sysRoot)
// checked from the network namespace of the container's init (st.Pid).
// In exclusive mode the devices are moved into that namespace only with
// move (they were allocated to this container: its own); a failure moves
// back what was moved.
func NetCheck(st specs.State, sysRoot string, devices []string, move bool) (retErr error) {
	if st.Pid <= 0 {
		return fmt.Errorf("the container state has no pid (netcheck runs as a createRuntime hook): %w", errdefs.ErrInvalidArgument)
	}
	v, err := ViewOf(st.Pid)
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
				moveBack(d)
			}
		}
	}()
	for _, name := range devices {
		d, err := ReadDevice(sysRoot, name)
		if err != nil {
			return err
		}
		if exclusive && !v.Host {
			if err := moveInto(d, st.Pid, v, move); err != nil {
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

// moveInto moves d into the network namespace of pid, as RDMA netns
// exclusive mode requires for the container to see it; the kernel gives
// it back to the node's namespace when that namespace ends. Soft-RoCE
// cannot move (the kernel requires disassociate_ucontext, which rxe
// lacks). The move of a device that supports it is not tested here (no
// such device in the VM suite).
func moveInto(d Device, pid int, v NetView, move bool) error {
	if d.Soft {
		return fmt.Errorf("RDMA network namespace mode is exclusive, and device %s is soft-RoCE (rxe), which cannot be moved into "+
			"the container's network namespace %s (the kernel requires disassociate_ucontext, which rxe lacks): "+
			"use shared mode (rdma system set netns shared) or a device that can move: %w", d.Name, v.Name, errdefs.ErrFailedPrecondition)
	}
	if !move {
		return fmt.Errorf("RDMA network namespace mode is exclusive, and this node does not move devices into containers' network namespaces "+
			"(hooks.exclusive_move = false): device %s cannot reach %s; set it where every RDMA container's devices are allocated to it alone: %w",
			d.Name, v.Name, errdefs.ErrFailedPrecondition)
	}
	link, err := netlink.RdmaLinkByName(d.Name)
	if err != nil {
		return fmt.Errorf("exclusive mode: device %s is not in the node's network namespace (moved into another?): %v: %w", d.Name, err, errdefs.ErrFailedPrecondition)
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return fmt.Errorf("exclusive mode: open the container's network namespace: %w", err)
	}
	defer f.Close()
	if err := netlink.RdmaLinkSetNsFd(link, uint32(f.Fd())); err != nil {
		return fmt.Errorf("exclusive mode: move device %s into the container's network namespace %s: %v: %w", d.Name, v.Name, err, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// moveBack returns d to the node's network namespace (that of PID 1),
// undoing moveInto after a later failure; best effort.
func moveBack(d Device) {
	f, err := os.Open("/proc/1/ns/net")
	if err != nil {
		return
	}
	defer f.Close()
	if link, err := netlink.RdmaLinkByName(d.Name); err == nil {
		_ = netlink.RdmaLinkSetNsFd(link, uint32(f.Fd())) // already home
		return
	}
	// it is in the container's namespace: only from there can it be named
	// again; the kernel returns it when that namespace ends
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
