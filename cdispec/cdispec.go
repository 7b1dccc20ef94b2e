// Package cdispec writes the Container Device Interface (CDI) spec of this
// node's RDMA devices, so that a CDI-enabled runtime (containerd's CRI
// plugin, a DRA driver, a device plugin answering with CDI names) can
// allocate them by name: swift.io/rdma=rxe0. The spec only says which
// device nodes a device is; everything else (limits, memlock, the zygote,
// the lease) is the shim's, computed for the devices a container was
// allocated.
package cdispec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispecs "tags.cncf.io/container-device-interface/specs-go"

	"github.com/swift-rdma/swift-containerd/rdma"
)

// Vendor and Class make the CDI kind of the node's RDMA devices.
const (
	Vendor = "swift.io"
	Class  = "rdma"
	Kind   = Vendor + "/" + Class
)

// DefaultDir is where the spec is written unless told otherwise (the
// first of containerd's default cdi_spec_dirs).
const DefaultDir = "/etc/cdi"

// Name is the fully qualified CDI name of a device: swift.io/rdma=rxe0.
func Name(device string) string { return Kind + "=" + device }

// Spec returns the CDI spec of inv: one CDI device per verbs device, its
// uverbs node; rdma_cm, shared by all, goes with any of them.
func Spec(inv rdma.Inventory) (*cdispecs.Spec, error) {
	if len(inv.Devices) == 0 {
		return nil, fmt.Errorf("this node has no RDMA devices to describe: %w", errdefs.ErrFailedPrecondition)
	}
	s := &cdispecs.Spec{Kind: Kind}
	for _, d := range inv.Devices {
		s.Devices = append(s.Devices, cdispecs.Device{
			Name:           d.Name,
			ContainerEdits: cdispecs.ContainerEdits{DeviceNodes: []*cdispecs.DeviceNode{node(d.Uverbs)}},
		})
	}
	if inv.RDMACM != nil {
		s.ContainerEdits.DeviceNodes = []*cdispecs.DeviceNode{node(*inv.RDMACM)}
	}
	v, err := cdi.MinimumRequiredVersion(s)
	if err != nil {
		return nil, fmt.Errorf("cdi version of the spec: %w", err)
	}
	s.Version = v
	return s, nil
}

func node(n rdma.Node) *cdispecs.DeviceNode {
	return &cdispecs.DeviceNode{Path: n.Path, HostPath: n.HostPath, Type: "c",
		Major: int64(n.Major), Minor: int64(n.Minor), Permissions: "rw"}
}

// Write validates s and writes it into dir, replacing the one an earlier
// run wrote (atomically, by the CDI library). It returns the file's path.
func Write(dir string, s *cdispecs.Spec) (string, error) {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		return "", fmt.Errorf("cdi spec dir %s: %w", dir, err)
	}
	name := cdi.GenerateSpecName(Vendor, Class) + ".yaml"
	if err := cache.WriteSpec(s, name); err != nil {
		return "", fmt.Errorf("write the cdi spec into %s: %w", dir, err)
	}
	return filepath.Join(dir, name), nil
}

// Remove deletes the spec Write writes into dir (a node with no RDMA
// devices left has none to describe); a missing spec is no error. It
// returns the spec's path.
func Remove(dir string) (string, error) {
	p := filepath.Join(dir, cdi.GenerateSpecName(Vendor, Class)+".yaml")
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return p, fmt.Errorf("remove the cdi spec %s: %w", p, err)
	}
	return p, nil
}
