package rdma

import (
	"os"
	"path/filepath"
	"strings"
)

// CgroupAvailable tells whether the rdma cgroup controller can take limits
// for new containers: on cgroup v2 it must be listed in the root's
// cgroup.controllers; on v1 its hierarchy must be mounted.
func CgroupAvailable(cgroupRoot string) bool {
	if b, err := os.ReadFile(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		for _, c := range strings.Fields(string(b)) {
			if c == "rdma" {
				return true
			}
		}
		return false
	}
	_, err := os.Stat(filepath.Join(cgroupRoot, "rdma", "rdma.max"))
	if err == nil {
		return true
	}
	// v1 hierarchies mounted at the root record rdma.max only in children;
	// the root directory itself still exists.
	fi, err := os.Stat(filepath.Join(cgroupRoot, "rdma"))
	return err == nil && fi.IsDir()
}
