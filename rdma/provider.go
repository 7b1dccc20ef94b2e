package rdma

import (
	"os"
	"path/filepath"
	"strings"
)

// Fork-sharing modes: how a zygote shares a device's pool QPs with the
// functions it forks.
const (
	// ShareRelay: the queues are mapped from the kernel and a child may
	// not ring the doorbell (rxe, siw); the zygote relays it.
	ShareRelay = "relay"
	// ShareBuffers: the queues live in memory the zygote allocates shared
	// (mlx5, through a parent domain); built, verified on rxe only.
	ShareBuffers = "shared-buffers"
	// ShareOwn: nothing is shared; functions connect QPs of their own.
	ShareOwn = "own-qps"
)

// Provider tells a device's kernel driver (from sysRoot's
// sys/class/infiniband/NAME/device/driver link; else, for a software
// device on a netdev (a "parent" file), rxe for a CA and siw for an RNIC;
// else the device name's prefix), where that came from, and its
// fork-sharing mode.
func Provider(sysRoot, name string) (driver, source, mode string) {
	dir := filepath.Join(sysRoot, "sys/class/infiniband", name)
	if l, err := os.Readlink(filepath.Join(dir, "device/driver")); err == nil {
		driver, source = filepath.Base(l), "device/driver"
	} else if _, err := os.Stat(filepath.Join(dir, "parent")); err == nil {
		// rxe and siw: software on a netdev, named as their creator chose
		// (a pod's own device is swp<inode>)
		nt, _ := os.ReadFile(filepath.Join(dir, "node_type"))
		switch {
		case strings.HasPrefix(string(nt), "1:"):
			driver, source = "rxe", "parent netdev, node type CA"
		case strings.HasPrefix(string(nt), "4:"):
			driver, source = "siw", "parent netdev, node type RNIC"
		}
	}
	if driver == "" {
		driver, source = strings.TrimRight(strings.TrimRight(name, "0123456789"), "_"), "name prefix"
	}
	switch driver {
	case "rxe", "rdma_rxe", "siw":
		mode = ShareRelay
	case "mlx5", "mlx5_core", "mlx5_ib":
		mode = ShareBuffers
	default:
		mode = ShareOwn
	}
	return driver, source, mode
}
