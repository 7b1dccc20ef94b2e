package verbs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// Fingerprint identifies what a cache is valid for: the kernel, the
// node's rdma-core, and every uverbs device with its number, node GUID,
// firmware and registration. Any difference makes a cache stale.
type Fingerprint struct {
	Kernel   string     `json:"kernel"`
	RDMACore string     `json:"rdma_core"`
	Devices  []FPDevice `json:"devices"`
}

// FPDevice is one uverbs device as sysfs shows it.
type FPDevice struct {
	Name      string `json:"name"`   // ibdev, e.g. rxe0
	Uverbs    string `json:"uverbs"` // uverbsN
	Dev       string `json:"dev"`    // MAJOR:MINOR of the uverbs node
	NodeGUID  string `json:"node_guid"`
	FWVersion string `json:"fw_ver"`
	// Inode is the inode number of sys/class/infiniband_verbs/<Uverbs>.
	// kernfs numbers every new node afresh and the class entry lives as
	// long as the device's registration, so a device registered again
	// (driver reload, firmware reset after a configuration change) has a
	// new one even when its name, number, GUID and firmware are the same.
	// The number is the same in every network namespace. 0: not recorded.
	Inode uint64 `json:"inode,omitempty"`
}

// Sources says where Collect looks. The zero value reads the running node.
type Sources struct {
	// SysRoot is the directory holding sys/class/... (config rdma.sys_root); "" means "/".
	SysRoot string
	// Release overrides the kernel release (uname -r) when not empty.
	Release string
	// LibDirs are searched for libibverbs.so.1; nil means the usual ones.
	LibDirs []string
}

// DefaultLibDirs are where rdma-core's libibverbs is looked for.
var DefaultLibDirs = []string{"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64", "/usr/lib", "/lib"}

// RDMACoreUnknown is the version recorded when libibverbs is not found.
const RDMACoreUnknown = "unknown"

// Collect reads the node's fingerprint. A node without RDMA devices has a
// fingerprint with no devices, not an error.
func Collect(src Sources) (Fingerprint, error) {
	var f Fingerprint
	root := src.SysRoot
	if root == "" {
		root = "/"
	}
	f.Kernel = src.Release
	if f.Kernel == "" {
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return f, fmt.Errorf("uname: %w", err)
		}
		f.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	dirs := src.LibDirs
	if dirs == nil {
		dirs = DefaultLibDirs
	}
	f.RDMACore = rdmaCoreVersion(dirs)

	verbsDir := filepath.Join(root, "sys/class/infiniband_verbs")
	entries, err := os.ReadDir(verbsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return f, fmt.Errorf("read %s: %w", verbsDir, err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue
		}
		d := FPDevice{Uverbs: e.Name()}
		if info, err := e.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				d.Inode = st.Ino
			}
		}
		if d.Name, err = readValue(filepath.Join(verbsDir, e.Name(), "ibdev")); err != nil {
			return f, err
		}
		if d.Dev, err = readValue(filepath.Join(verbsDir, e.Name(), "dev")); err != nil {
			return f, err
		}
		if d.Name == "" || strings.ContainsRune(d.Name, '/') {
			return f, fmt.Errorf("%s/%s/ibdev names no valid device (%q): %w", verbsDir, e.Name(), d.Name, errdefs.ErrFailedPrecondition)
		}
		ib := filepath.Join(root, "sys/class/infiniband", d.Name)
		d.NodeGUID, _ = readValue(filepath.Join(ib, "node_guid"))
		d.FWVersion, _ = readValue(filepath.Join(ib, "fw_ver"))
		f.Devices = append(f.Devices, d)
	}
	sort.Slice(f.Devices, func(i, j int) bool { return f.Devices[i].Name < f.Devices[j].Name })
	return f, nil
}

func readValue(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// rdmaCoreVersion derives rdma-core's version from libibverbs' file name:
// libibverbs.so.1 -> libibverbs.so.1.14.44.0 is rdma-core 44.0.
func rdmaCoreVersion(dirs []string) string {
	for _, d := range dirs {
		p, err := filepath.EvalSymlinks(filepath.Join(d, "libibverbs.so.1"))
		if err != nil {
			continue
		}
		return versionFromSoname(filepath.Base(p))
	}
	return RDMACoreUnknown
}

func versionFromSoname(base string) string {
	v, ok := strings.CutPrefix(base, "libibverbs.so.")
	if !ok || v == "" {
		return RDMACoreUnknown
	}
	parts := strings.Split(v, ".")
	if len(parts) >= 4 {
		return strings.Join(parts[2:], ".")
	}
	return v
}

// ID is a short stable hash of the fingerprint, used in cache directory names.
func (f Fingerprint) ID() string {
	b, _ := json.Marshal(f)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Device returns the device called name.
func (f Fingerprint) Device(name string) (FPDevice, bool) {
	for _, d := range f.Devices {
		if d.Name == name {
			return d, true
		}
	}
	return FPDevice{}, false
}

// Diff lists, in a stable order, how live differs from cached; empty
// means the same node.
func Diff(cached, live Fingerprint) []string {
	var r []string
	if cached.Kernel != live.Kernel {
		r = append(r, fmt.Sprintf("kernel release changed: %s -> %s", cached.Kernel, live.Kernel))
	}
	if cached.RDMACore != live.RDMACore {
		r = append(r, fmt.Sprintf("rdma-core changed: %s -> %s", cached.RDMACore, live.RDMACore))
	}
	for _, c := range cached.Devices {
		l, ok := live.Device(c.Name)
		if !ok {
			r = append(r, fmt.Sprintf("device %s (%s) removed", c.Name, c.Uverbs))
			continue
		}
		for _, x := range []struct{ what, a, b string }{
			{"uverbs node", c.Uverbs, l.Uverbs},
			{"device number", c.Dev, l.Dev},
			{"node GUID", c.NodeGUID, l.NodeGUID},
			{"firmware", c.FWVersion, l.FWVersion},
		} {
			if x.a != x.b {
				r = append(r, fmt.Sprintf("device %s: %s changed: %s -> %s", c.Name, x.what, x.a, x.b))
			}
		}
		if c.Inode != 0 && l.Inode != 0 && c.Inode != l.Inode {
			r = append(r, fmt.Sprintf("device %s (%s) was registered again since the cache was built (class entry inode %d -> %d)",
				c.Name, c.Uverbs, c.Inode, l.Inode))
		}
	}
	for _, l := range live.Devices {
		if _, ok := cached.Device(l.Name); !ok {
			r = append(r, fmt.Sprintf("device %s (%s) added", l.Name, l.Uverbs))
		}
	}
	return r
}
