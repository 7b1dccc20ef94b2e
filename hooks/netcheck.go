package hooks

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
)

// RoCEPort is the UDP port RoCE v2 runs on; soft-RoCE (rxe) receives on a
// kernel socket bound to it.
const RoCEPort = 4791

// Port is what sysfs says of one port of a device.
type Port struct {
	Num       int
	State     string         // "4: ACTIVE"
	LinkLayer string         // "Ethernet" (RoCE) or "InfiniBand"
	GIDs      map[int]string // index -> GID as sysfs prints it; zero GIDs left out
}

// Device is an RDMA device as the checks see it.
type Device struct {
	Name  string
	Ports []Port
	// Soft is soft-RoCE (rxe): a device in software on a netdev (sysfs
	// has its "parent"), whose packets the kernel receives on a UDP
	// socket of its own.
	Soft bool
}

// NetView is what the container's network namespace holds.
type NetView struct {
	Name  string       // "net:[4026532301]", for errors
	Host  bool         // the node's own namespace
	Addrs []netip.Addr // its addresses
	// RoCESocket tells whether a socket is bound to UDP RoCEPort there
	// (soft-RoCE's receive path).
	RoCESocket bool
}

// ReadDevice reads device name's ports, their state, link layer and GID
// table from sysRoot/sys/class/infiniband.
func ReadDevice(sysRoot, name string) (Device, error) {
	d := Device{Name: name}
	dir := filepath.Join(sysRoot, "sys/class/infiniband", name)
	if _, err := os.Stat(dir); err != nil {
		return d, fmt.Errorf("device %s: %w: %w", name, err, errdefs.ErrFailedPrecondition)
	}
	d.Soft = isSoftRoCE(dir)
	ents, err := os.ReadDir(filepath.Join(dir, "ports"))
	if err != nil {
		return d, fmt.Errorf("device %s: ports: %w: %w", name, err, errdefs.ErrFailedPrecondition)
	}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		pdir := filepath.Join(dir, "ports", e.Name())
		p := Port{Num: n, GIDs: map[int]string{}}
		p.State = readTrim(filepath.Join(pdir, "state"))
		p.LinkLayer = readTrim(filepath.Join(pdir, "link_layer"))
		gids, _ := os.ReadDir(filepath.Join(pdir, "gids"))
		for _, g := range gids {
			i, err := strconv.Atoi(g.Name())
			if err != nil {
				continue
			}
			v := readTrim(filepath.Join(pdir, "gids", g.Name()))
			if v != "" && strings.Trim(v, "0:") != "" {
				p.GIDs[i] = v
			}
		}
		d.Ports = append(d.Ports, p)
	}
	sort.Slice(d.Ports, func(i, j int) bool { return d.Ports[i].Num < d.Ports[j].Num })
	return d, nil
}

// isSoftRoCE tells whether the device whose sysfs directory is dir is
// soft-RoCE: a device on a netdev (sysfs has its "parent") that is a CA,
// not siw's RNIC.
func isSoftRoCE(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "parent")); err != nil {
		return false
	}
	return strings.HasPrefix(readTrim(filepath.Join(dir, "node_type")), "1:")
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// SysfsGID is addr's GID as sysfs prints it (IPv4 mapped into IPv6).
func SysfsGID(addr netip.Addr) string {
	b := netip.AddrFrom16(addr.As16()).As16()
	var parts []string
	for i := 0; i+1 < len(b); i += 2 {
		parts = append(parts, fmt.Sprintf("%02x%02x", b[i], b[i+1]))
	}
	return strings.Join(parts, ":")
}

// UDPBound tells whether a /proc/net/udp or udp6 table lists a socket
// bound to local port.
func UDPBound(table string, port int) bool {
	want := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(strings.NewReader(table))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 2 && strings.HasSuffix(f[1], want) {
			return true
		}
	}
	return false
}

// CheckNet checks that RDMA on d can work from the network namespace v:
// a port is ACTIVE, and on RoCE one of its GIDs carries an IPv4 address
// of the namespace (the zygote's GID); soft-RoCE also needs its UDP
// socket in that namespace. The error names the device, the namespace
// and what is missing (FailedPrecondition).
func CheckNet(d Device, v NetView) error {
	var active []Port
	var states []string
	for _, p := range d.Ports {
		states = append(states, fmt.Sprintf("port %d %s", p.Num, orNone(p.State)))
		if strings.HasSuffix(p.State, "ACTIVE") {
			active = append(active, p)
		}
	}
	if len(active) == 0 {
		return fmt.Errorf("device %s has no ACTIVE port (%s): %w", d.Name, orNone(strings.Join(states, ", ")), errdefs.ErrFailedPrecondition)
	}
	var v4 []string
	for _, a := range v.Addrs {
		if a.Is4() || a.Is4In6() {
			v4 = append(v4, a.Unmap().String())
		}
	}
	for _, p := range active {
		if p.LinkLayer != "Ethernet" {
			return nil // InfiniBand: GID 0 and the LID, whatever the namespace
		}
		if !portHasAddrGID(p, v.Addrs) {
			continue
		}
		if d.Soft && !v.Host && !v.RoCESocket {
			return fmt.Errorf("device %s is soft-RoCE (rxe), and the container's network namespace %s has no socket on UDP port %d: "+
				"rxe receives only in the network namespace its device was made in (before Linux 7.1, always the node's), so RDMA from the pod's own network cannot flow; "+
				"run it with the host's network (hostNetwork), or on Linux 7.1 and later give the pod a device made in its namespace (rdma.pod_softroce), or use a RoCE device: %w",
				d.Name, v.Name, RoCEPort, errdefs.ErrFailedPrecondition)
		}
		return nil
	}
	return fmt.Errorf("device %s has no GID for an IPv4 address of the container's network namespace %s (addresses: %s): "+
		"the pod's interface must be on the device's link (its netdev, or a macvlan or VLAN of it): %w",
		d.Name, v.Name, orNone(strings.Join(v4, ", ")), errdefs.ErrFailedPrecondition)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// portHasAddrGID tells whether one of p's GIDs is that of an IPv4
// address among addrs (the GID a zygote in their namespace uses).
func portHasAddrGID(p Port, addrs []netip.Addr) bool {
	for _, a := range addrs {
		if !a.Is4() && !a.Is4In6() {
			continue
		}
		want := SysfsGID(a.Unmap())
		for _, g := range p.GIDs {
			if g == want {
				return true
			}
		}
	}
	return false
}
