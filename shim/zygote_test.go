package shim

import (
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// TestFunctionUIDs: the node's uid base reaches the pool description unless
// the container's user namespace does not map all of its uids.
func TestFunctionUIDs(t *testing.T) {
	userns := func(uid, gid []specs.LinuxIDMapping) *specs.Spec {
		return &specs.Spec{Linux: &specs.Linux{UIDMappings: uid, GIDMappings: gid}}
	}
	whole := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 1 << 31}}
	small := []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
	tests := []struct {
		name string
		spec *specs.Spec
		base uint32
		want uint32
	}{
		{"no user namespace", &specs.Spec{Linux: &specs.Linux{}}, 2000000000, 2000000000},
		{"no linux section", &specs.Spec{}, 2000000000, 2000000000},
		{"off on the node", userns(whole, whole), 0, 0},
		{"mapped", userns(whole, whole), 2000000000, 2000000000},
		{"uids not mapped", userns(small, whole), 2000000000, 0},
		{"gids not mapped", userns(whole, small), 2000000000, 0},
		{"the range's last uid not mapped", userns([]specs.LinuxIDMapping{{ContainerID: 2000000000, HostID: 1, Size: 127}}, whole), 2000000000, 0},
		{"exactly mapped", userns([]specs.LinuxIDMapping{{ContainerID: 2000000000, HostID: 1, Size: 128}},
			[]specs.LinuxIDMapping{{ContainerID: 2000000000, HostID: 1, Size: 128}}), 2000000000, 2000000000},
		{"mapped inside a small namespace", userns(small, small), 60000, 60000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := functionUIDs(tc.spec, tc.base); got != tc.want {
				t.Errorf("functionUIDs = %d, want %d", got, tc.want)
			}
		})
	}
}
