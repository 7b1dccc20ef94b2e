package rdmatest

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Device describes one fake verbs device.
type Device struct {
	Name         string // ibdev, e.g. rxe0
	Uverbs       string // uverbsN
	Major, Minor uint32
	// NodeMajor/NodeMinor, when non-zero, give the /dev node a different
	// number than sysfs (to test the mismatch check).
	NodeMajor, NodeMinor uint32
}

// Tree is a fake node: SysRoot and DevRoot as config.RDMA expects them.
type Tree struct {
	SysRoot, DevRoot string
}

// UverbsMajor is the kernel's infiniband_verbs character major.
const UverbsMajor = 231

// Make writes a fake tree below root with devs and, if cm, an rdma_cm node (10:cmMinor).
func Make(root string, devs []Device, cm bool, cmMinor uint32) (Tree, error) {
	t := Tree{SysRoot: filepath.Join(root, "sysroot"), DevRoot: filepath.Join(root, "dev")}
	verbs := filepath.Join(t.SysRoot, "sys/class/infiniband_verbs")
	if err := os.MkdirAll(verbs, 0o755); err != nil {
		return t, err
	}
	if err := os.WriteFile(filepath.Join(verbs, "abi_version"), []byte("6\n"), 0o644); err != nil {
		return t, err
	}
	if err := os.MkdirAll(filepath.Join(t.DevRoot, "infiniband"), 0o755); err != nil {
		return t, err
	}
	for i, d := range devs {
		uv := filepath.Join(verbs, d.Uverbs)
		ib := filepath.Join(t.SysRoot, "sys/class/infiniband", d.Name)
		files := map[string]string{
			filepath.Join(uv, "ibdev"):     d.Name + "\n",
			filepath.Join(uv, "dev"):       fmt.Sprintf("%d:%d\n", d.Major, d.Minor),
			filepath.Join(ib, "node_guid"): fmt.Sprintf("0200:00ff:fe00:%04x\n", i+1),
			filepath.Join(ib, "fw_ver"):    "1.0.0\n",
		}
		for p, c := range files {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return t, err
			}
			if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
				return t, err
			}
		}
		maj, min := d.Major, d.Minor
		if d.NodeMajor != 0 || d.NodeMinor != 0 {
			maj, min = d.NodeMajor, d.NodeMinor
		}
		if err := mknod(filepath.Join(t.DevRoot, "infiniband", d.Uverbs), maj, min); err != nil {
			return t, err
		}
	}
	if cm {
		p := filepath.Join(t.SysRoot, "sys/class/misc/rdma_cm/dev")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return t, err
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, "10:%d\n", cmMinor), 0o644); err != nil {
			return t, err
		}
		if err := mknod(filepath.Join(t.DevRoot, "infiniband", "rdma_cm"), 10, cmMinor); err != nil {
			return t, err
		}
	}
	return t, nil
}

func mknod(path string, maj, min uint32) error {
	_ = os.Remove(path)
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(maj, min))); err != nil {
		return fmt.Errorf("mknod %s %d:%d (needs root): %w", path, maj, min, err)
	}
	return nil
}
