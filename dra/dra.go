// Package dra is Swift's Dynamic Resource Allocation driver, rdma.swift.io.
//
// It publishes the node's RDMA devices in a ResourceSlice, one device each
// with attributes a claim can select on (its verbs name, netdev, link
// layer, port state, firmware, node GUID, NUMA node, whether it is
// soft-RoCE, the zygote's fork-sharing mode on it, and Kubernetes'
// standard PCIe root and PCI bus ID of a PCI function), and prepares a claim's devices as their CDI names
// (swift.io/rdma=DEVICE, from the spec package cdispec writes). The
// kubelet hands those names to containerd, which applies them from the
// node's CDI spec; the shim then sees the devices in the container's spec
// and configures exactly them, as for any allocation (limits, memlock,
// the zygote, the lease). Nothing else is prepared, so unpreparing only
// forgets the claim.
//
// Device health is the port state, read again on the kernel's netlink
// events (a link's state, an RDMA device's arrival, departure or rename)
// and every rescan: ACTIVE is healthy, anything else (a link down)
// unhealthy, and reported to the kubelet through the DRA health service.
package dra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/swift-rdma/swift-containerd/cdispec"
	"github.com/swift-rdma/swift-containerd/hooks"
	"github.com/swift-rdma/swift-containerd/internal/atomicfile"
	"github.com/swift-rdma/swift-containerd/rdma"
)

// DriverName is the driver's name: the attribute domain of its devices and
// the Driver of its allocation results.
const DriverName = "rdma.swift.io"

// Attribute names (in the driver's domain:
// device.attributes["rdma.swift.io"].netdev).
const (
	AttrName      = "name"      // the verbs device name: rxe0, mlx5_0
	AttrNetdev    = "netdev"    // the netdev under its port 1, if any
	AttrLinkLayer = "linkLayer" // Ethernet (RoCE) or InfiniBand
	AttrPortState = "portState" // ACTIVE, DOWN, ... (port 1)
	AttrFirmware  = "firmware"
	AttrNodeGUID  = "nodeGUID"
	AttrSoftRoCE  = "softRoCE" // soft-RoCE (rxe)
	AttrNUMANode  = "numaNode" // only where sysfs gives one
	// AttrForkSharing is how the zygote shares the device's pool QPs with
	// the functions it forks: relay (rxe, siw), shared-buffers (mlx5) or
	// own-qps (rdma.Provider).
	AttrForkSharing = "forkSharing"
)

// Kubernetes' standard attributes, where the device is a PCI function:
// resource.kubernetes.io/pcieRoot (pci<domain>:<bus>) and
// resource.kubernetes.io/pciBusID, which a claim can match across drivers.
var (
	AttrPCIeRoot = deviceattribute.StandardDeviceAttributePCIeRoot
	AttrPCIBusID = deviceattribute.StandardDeviceAttributePCIBusID
)

// Device is one device as the driver publishes it.
type Device struct {
	// Slice is its name in the ResourceSlice: the verbs name made a DNS
	// label (mlx5_0 is mlx5-0).
	Slice string
	rdma.Device
	Netdev, LinkLayer, PortState string
	Soft                         bool
	NUMA                         int64 // -1: none
	ForkSharing                  string
	PCIBusID, PCIeRoot           string // "": not a PCI function
}

// Healthy tells whether the device can carry traffic: its port is ACTIVE.
func (d Device) Healthy() bool { return d.PortState == "ACTIVE" }

var notLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// SliceName makes a verbs device name a DNS label ("" if it cannot be one).
func SliceName(name string) string {
	s := strings.Trim(notLabel.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(s) > 63 {
		return ""
	}
	return s
}

// Scan lists the devices of the node's network namespace (a pod's own
// soft-RoCE device is not the node's to offer), in name order. A device
// whose name makes no DNS label, or the label of another, is left out and
// named in the error beside the list.
func Scan(sysRoot, devRoot string) ([]Device, rdma.Inventory, error) {
	inv, err := rdma.Discover(sysRoot, devRoot)
	if err != nil {
		return nil, inv, err
	}
	inv = inv.Aside(hooks.IsPodLink)
	var out []Device
	var bad []string
	seen := map[string]string{}
	for _, d := range inv.Devices {
		s := SliceName(d.Name)
		if s == "" || seen[s] != "" {
			bad = append(bad, d.Name)
			continue
		}
		seen[s] = d.Name
		dev := Device{Slice: s, Device: d, NUMA: -1}
		if hd, err := hooks.ReadDevice(sysRoot, d.Name); err == nil {
			dev.Soft = hd.Soft
			if len(hd.Ports) > 0 {
				dev.LinkLayer = hd.Ports[0].LinkLayer
				// "4: ACTIVE"
				st := hd.Ports[0].State
				if i := strings.Index(st, ": "); i >= 0 {
					st = st[i+2:]
				}
				dev.PortState = st
			}
		}
		dir := filepath.Join(sysRoot, "sys/class/infiniband", d.Name)
		dev.Netdev = readTrim(filepath.Join(dir, "ports/1/gid_attrs/ndevs/0"))
		if dev.Netdev == "" {
			dev.Netdev = readTrim(filepath.Join(dir, "parent"))
		}
		if n, err := strconv.ParseInt(readTrim(filepath.Join(dir, "device/numa_node")), 10, 64); err == nil && n >= 0 {
			dev.NUMA = n
		}
		_, _, dev.ForkSharing = rdma.Provider(sysRoot, d.Name)
		// a PCI function's device link ends in its bus ID
		if l, err := os.Readlink(filepath.Join(dir, "device")); err == nil {
			id := filepath.Base(l)
			if a, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(id,
				deviceattribute.WithFSFromRoot(filepath.Join(sysRoot, "sys"))); err == nil && a.Value.StringValue != nil {
				dev.PCIBusID, dev.PCIeRoot = id, *a.Value.StringValue
			}
		}
		out = append(out, dev)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slice < out[j].Slice })
	if len(bad) > 0 {
		return out, inv, fmt.Errorf("devices %s: their names make no distinct DNS label, so they are not published: %w",
			strings.Join(bad, ", "), errdefs.ErrInvalidArgument)
	}
	return out, inv, nil
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// SliceDevice is d as a ResourceSlice lists it.
func SliceDevice(d Device) resourceapi.Device {
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
	soft := d.Soft
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		AttrName:      str(d.Name),
		AttrLinkLayer: str(d.LinkLayer),
		AttrPortState: str(d.PortState),
		AttrSoftRoCE:  {BoolValue: &soft},
	}
	for k, v := range map[resourceapi.QualifiedName]string{AttrNetdev: d.Netdev, AttrFirmware: d.FWVersion, AttrNodeGUID: d.NodeGUID,
		AttrForkSharing: d.ForkSharing, AttrPCIeRoot: d.PCIeRoot, AttrPCIBusID: d.PCIBusID} {
		if v != "" {
			attrs[k] = str(v)
		}
	}
	if d.NUMA >= 0 {
		n := d.NUMA
		attrs[AttrNUMANode] = resourceapi.DeviceAttribute{IntValue: &n}
	}
	return resourceapi.Device{Name: d.Slice, Attributes: attrs}
}

// Driver is the kubelet plugin: kubeletplugin.Start serves it.
type Driver struct {
	Node             string // the pool: the node's name
	SysRoot, DevRoot string
	CDIDir           string // where the CDI spec of the node's devices is written
	StateDir         string // the prepared claims, kept across restarts
	Rescan           time.Duration
	// Events, when set, receives on a kernel event that may change the
	// devices (Events): a scan follows at once, and again a second later
	// (a port may follow its netdev's event a moment after).
	Events <-chan struct{}
	// Fatal ends the driver on an error it cannot get past.
	Fatal func(error)

	mu       sync.Mutex
	devices  []Device
	scanned  bool                   // a scan has run
	prepared map[types.UID][]string // claim -> its devices' slice names
	health   chan struct{}          // closed and replaced on a health change
}

// stateFile keeps the prepared claims.
const stateFile = "prepared.json"

// Load scans the node, writes the CDI spec and reads the prepared claims
// a previous run left. It must be called before Start.
func (d *Driver) Load(ctx context.Context) error {
	d.health = make(chan struct{})
	d.prepared = map[types.UID][]string{}
	if b, err := os.ReadFile(filepath.Join(d.StateDir, stateFile)); err == nil {
		if err := json.Unmarshal(b, &d.prepared); err != nil {
			return fmt.Errorf("%s: %w: %w", filepath.Join(d.StateDir, stateFile), err, errdefs.ErrDataLoss)
		}
		if d.prepared == nil { // "null"
			d.prepared = map[types.UID][]string{}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	_, err := d.scan(ctx)
	return err
}

// scan reads the devices, rewrites the CDI spec when they changed and
// tells whether they or their port states changed (the slice then
// changes, and the health is reported again).
func (d *Driver) scan(ctx context.Context) (bool, error) {
	devs, inv, err := Scan(d.SysRoot, d.DevRoot)
	if err != nil && devs == nil {
		return false, err
	}
	if err != nil {
		log.G(ctx).WithError(err).Warn("rdma devices left out")
	}
	d.mu.Lock()
	old, first := d.devices, !d.scanned
	d.mu.Unlock()
	changed := !slices.Equal(old, devs)
	// the spec first: a claim prepared once the devices are published
	// names a CDI device the spec has
	if (changed || first) && len(inv.Devices) > 0 {
		s, err := cdispec.Spec(inv)
		if err != nil {
			return false, err
		}
		p, err := cdispec.Write(d.CDIDir, s)
		if err != nil {
			return false, err
		}
		log.G(ctx).WithField("path", p).WithField("devices", inv.Names()).Info("wrote the CDI spec of the node's rdma devices")
	} else if (changed || first) && len(inv.Devices) == 0 {
		// no device left: a spec naming gone device nodes would let a
		// stale claim's container start without them
		p, err := cdispec.Remove(d.CDIDir)
		if err != nil {
			return false, err
		}
		log.G(ctx).WithField("path", p).Info("no rdma devices: removed the CDI spec")
	}
	d.mu.Lock()
	d.devices, d.scanned = devs, true
	if changed {
		close(d.health)
		d.health = make(chan struct{})
	}
	d.mu.Unlock()
	return changed, nil
}

// Devices returns the devices as last scanned.
func (d *Driver) Devices() []Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.devices)
}

// Resources is the node's pool: one slice of its devices.
func (d *Driver) Resources() resourceslice.DriverResources {
	d.mu.Lock()
	defer d.mu.Unlock()
	devs := []resourceapi.Device{}
	for _, x := range d.devices {
		devs = append(devs, SliceDevice(x))
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{d.Node: {Slices: []resourceslice.Slice{{Devices: devs}}}}}
}

// eventSettle is how long a scan waits after the first event of a burst
// (the burst makes one scan; an endless stream of events still scans every
// eventSettle), and eventAgain how long after the last event it scans once
// more, for a state the kernel settles later.
const (
	eventSettle = 100 * time.Millisecond
	eventAgain  = time.Second
)

// Watch scans after each of d.Events and every d.Rescan until ctx ends,
// republishing through publish when the devices change. A rescan due while
// an event's scan is pending is left to that scan.
func (d *Driver) Watch(ctx context.Context, publish func(context.Context, resourceslice.DriverResources) error) {
	t := time.NewTicker(d.Rescan)
	defer t.Stop()
	var soon, again <-chan time.Time
	var why string
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if soon != nil {
				continue
			}
			why = "rescan"
		case <-d.Events:
			if soon == nil {
				soon = time.After(eventSettle)
			}
			again = time.After(eventAgain)
			continue
		case <-soon:
			soon, why = nil, "netlink event"
		case <-again:
			again, why = nil, "netlink event"
		}
		changed, err := d.scan(ctx)
		if err != nil {
			log.G(ctx).WithError(err).Warn("rescan rdma devices")
			continue
		}
		if changed {
			log.G(ctx).WithField("after", why).Info("rdma devices or their ports changed: republishing")
			if err := publish(ctx, d.Resources()); err != nil {
				log.G(ctx).WithError(err).Warn("republish rdma devices")
			}
		}
	}
}

// PrepareResourceClaims gives each claim the CDI names of its devices of
// this driver on this node. A device that is not this node's now, or that
// another prepared claim holds, fails that claim.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		devs, names, err := d.prepare(c)
		if err != nil {
			out[c.UID] = kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err)}
			continue
		}
		d.prepared[c.UID] = names
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devs}
		log.G(ctx).WithField("claim", c.Namespace+"/"+c.Name).WithField("devices", names).Info("prepared")
	}
	return out, d.save()
}

func (d *Driver) prepare(c *resourceapi.ResourceClaim) ([]kubeletplugin.Device, []string, error) {
	if c.Status.Allocation == nil {
		return nil, nil, fmt.Errorf("not allocated: %w", errdefs.ErrFailedPrecondition)
	}
	var devs []kubeletplugin.Device
	var names []string
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		if r.Pool != d.Node {
			return nil, nil, fmt.Errorf("device %s is of pool %q, not this node's (%q): %w", r.Device, r.Pool, d.Node, errdefs.ErrInvalidArgument)
		}
		var dev *Device
		for i := range d.devices {
			if d.devices[i].Slice == r.Device {
				dev = &d.devices[i]
			}
		}
		if dev == nil {
			return nil, nil, fmt.Errorf("device %s is not on this node now: %w", r.Device, errdefs.ErrNotFound)
		}
		devs = append(devs, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device,
			CDIDeviceIDs: []string{cdispec.Name(dev.Name)}})
		// admin access (a monitoring claim) shares the device with the
		// claim that has it: it neither holds it nor is held off
		if r.AdminAccess != nil && *r.AdminAccess {
			continue
		}
		for uid, held := range d.prepared {
			if uid == c.UID {
				continue
			}
			for _, h := range held {
				if h == r.Device {
					return nil, nil, fmt.Errorf("device %s is held by claim %s, prepared before: %w", r.Device, uid, errdefs.ErrAlreadyExists)
				}
			}
		}
		if !slices.Contains(names, r.Device) {
			names = append(names, r.Device)
		}
	}
	return devs, names, nil
}

// UnprepareResourceClaims forgets the claims (nothing was made for them).
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[types.UID]error{}
	for _, c := range claims {
		delete(d.prepared, c.UID)
		out[c.UID] = nil
		log.G(ctx).WithField("claim", c.String()).Info("unprepared")
	}
	return out, d.save()
}

func (d *Driver) save() error {
	b, err := json.Marshal(d.prepared)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.StateDir, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(d.StateDir, stateFile), b, 0o600)
}

// HandleError logs a background error; a fatal one ends the driver
// through d.Fatal.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	log.G(ctx).WithError(err).Error(msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.Fatal != nil {
		d.Fatal(fmt.Errorf("%s: %w", msg, err))
	}
}

// healthTimeout is how long the kubelet trusts a report: three rescans.
func (d *Driver) healthTimeout() time.Duration { return 3 * d.Rescan }

// WatchHealthStatus reports every device's health now, again on each
// change the rescans see, and at least every rescan period.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	for {
		d.mu.Lock()
		changed := d.health
		r := kubeletplugin.DeviceHealthReport{}
		now := time.Now()
		for _, x := range d.devices {
			h, msg := kubeletplugin.HealthStatusHealthy, "port 1 ACTIVE"
			if !x.Healthy() {
				h, msg = kubeletplugin.HealthStatusUnhealthy, "port 1 "+x.PortState
			}
			r.Devices = append(r.Devices, kubeletplugin.DeviceHealth{PoolName: d.Node, DeviceName: x.Slice, Health: h,
				LastUpdated: now, HealthCheckTimeout: d.healthTimeout(), Message: msg})
		}
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case reports <- r:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(d.Rescan):
		}
	}
}
