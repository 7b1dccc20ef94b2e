// Package netnstest makes network namespaces for tests, as a CRI pod's
// sandbox makes them: a new namespace bind-mounted at a path, which the
// code under test opens from the node's namespace.
package netnstest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Run calls f with the path of a new network namespace and a netlink
// handle in it, from a thread in the node's namespace; the namespace is
// gone after f. It needs root, and fails the test saying so without it.
func Run(t *testing.T, f func(path string, h *netlink.Handle)) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test makes network namespaces: run it as root")
	}
	path := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		orig, err := netns.Get()
		if err != nil {
			t.Error(err)
			return
		}
		defer orig.Close()
		ns, err := netns.New()
		if err != nil {
			t.Errorf("new network namespace: %v", err)
			return
		}
		defer ns.Close()
		if err := unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, ""); err != nil {
			t.Errorf("bind the namespace: %v", err)
			return
		}
		defer unix.Unmount(path, unix.MNT_DETACH)
		if err := netns.Set(orig); err != nil { // f runs as the shim does: from the node's namespace
			t.Error(err)
			return
		}
		h, err := netlink.NewHandleAt(ns)
		if err != nil {
			t.Error(err)
			return
		}
		defer h.Close()
		f(path, h)
	}()
	<-done
}

// AddLink adds interface name with address cidr, up, through h: a bridge,
// the link type every kernel of the test machines has (no dummy module).
func AddLink(t *testing.T, h *netlink.Handle, name, cidr string) netlink.Link {
	t.Helper()
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		t.Fatalf("add %s (the bridge module): %v", name, err)
	}
	link, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddrAdd(link, a); err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	return link
}
