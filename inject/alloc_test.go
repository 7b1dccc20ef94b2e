package inject

import (
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/rdma"
)

func TestAllocated(t *testing.T) {
	inv := inventory(true)
	inv.MAD = []rdma.MADNode{{Node: rdma.Node{Path: "/dev/infiniband/umad0", Major: 231, Minor: 0}, Device: "rxe1"}}
	tests := []struct {
		name    string
		devices []specs.LinuxDevice
		rules   []specs.LinuxDeviceCgroup
		want    []string
		err     []string // the error's words; nil: no error
	}{
		{name: "no devices: nothing allocated"},
		{
			name:    "other devices only",
			devices: []specs.LinuxDevice{{Path: "/dev/fuse", Type: "c", Major: 10, Minor: 229}, {Path: "/dev/nvidia0", Type: "c", Major: 195, Minor: 0}},
		},
		{
			name:    "a device plugin's uverbs1 and rdma_cm",
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/uverbs1", Type: "c", Major: 231, Minor: 193}, {Path: "/dev/infiniband/rdma_cm", Type: "c", Major: 10, Minor: 58}},
			want:    []string{"rxe1"},
		},
		{
			name:    "both, listed backwards, come in the node's order",
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/uverbs1", Type: "c", Major: 231, Minor: 193}, {Path: "/dev/infiniband/uverbs0", Type: "c", Major: 231, Minor: 192}},
			want:    []string{"rxe0", "rxe1"},
		},
		{
			name:    "a umad node gives the device it serves",
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/umad0", Type: "c", Major: 231, Minor: 0}, {Path: "/dev/infiniband/uverbs0", Type: "c", Major: 231, Minor: 192}},
			want:    []string{"rxe0", "rxe1"},
		},
		{
			name:    "a umad node alone is an allocation of its device",
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/umad0", Type: "c", Major: 231, Minor: 0}},
			want:    []string{"rxe1"},
		},
		{
			name:    "rdma_cm's numbers under a uverbs name",
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/uverbs0", Type: "c", Major: 10, Minor: 58}},
			err:     []string{"/dev/infiniband/uverbs0", "c 10:58", "which is rdma_cm on this node"},
		},
		{
			name:    "a umad's numbers under a uverbs name",
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/uverbs0", Type: "c", Major: 231, Minor: 0}},
			err:     []string{"/dev/infiniband/uverbs0", "c 231:0", "umad0 (rxe1)"},
		},
		{
			name:    "a path that is not clean",
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/./uverbs0", Type: "c", Major: 231, Minor: 192}},
			err:     []string{`"/dev/infiniband/./uverbs0"`, "clean path"},
		},
		{
			name:  "a cgroup rule allowing a uverbs minor gives its device (mknod)",
			rules: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}, {Allow: true, Type: "c", Major: i64(231), Minor: i64(193), Access: "rw"}},
			want:  []string{"rxe1"},
		},
		{
			name:  "a wildcard rule gives every device",
			rules: []specs.LinuxDeviceCgroup{{Allow: true, Type: "c", Major: i64(231), Access: "rwm"}},
			want:  []string{"rxe0", "rxe1"},
		},
		{
			name:  "allow all (privileged) gives every device",
			rules: []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}},
			want:  []string{"rxe0", "rxe1"},
		},
		{
			name: "containerd's default mknod-only rule and a deny give nothing",
			rules: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}, {Allow: true, Type: "c", Access: "m"},
				{Allow: false, Type: "c", Major: i64(231), Access: "rwm"}, {Allow: true, Type: "c", Major: i64(1), Minor: i64(3), Access: "rwm"}},
		},
		{
			name:    "a uverbs node at another path counts by its number",
			devices: []specs.LinuxDevice{{Path: "/dev/rdma-a", Type: "c", Major: 231, Minor: 192}},
			want:    []string{"rxe0"},
		},
		{
			name:    "a uverbs name on another device's number",
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/uverbs0", Type: "c", Major: 231, Minor: 193}},
			err:     []string{"/dev/infiniband/uverbs0", "c 231:193", "uverbs1 (rxe1)", "wrong device"},
		},
		{
			name:    "a node under /dev/infiniband that this node does not have",
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/uverbs7", Type: "c", Major: 231, Minor: 199}},
			err:     []string{"/dev/infiniband/uverbs7", "c 231:199", "not an RDMA device on this node", "uverbs0 c 231:192 (rxe0)", "rdma_cm c 10:58", "umad0 c 231:0 (rxe1)"},
		},
		{
			name:    "the uverbs major at another path with an unknown minor",
			devices: []specs.LinuxDevice{{Path: "/dev/x", Type: "c", Major: 231, Minor: 250}},
			err:     []string{"/dev/x", "c 231:250", "not an RDMA device on this node"},
		},
		{
			name:    "a block device under /dev/infiniband",
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/uverbs0", Type: "b", Major: 231, Minor: 192}},
			err:     []string{"/dev/infiniband/uverbs0", "b 231:192", "not an RDMA device"},
		},
		{
			name:    "a path that leaves /dev/infiniband and comes back",
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/../infiniband/uverbs0", Type: "c", Major: 231, Minor: 192}},
			err:     []string{"uverbs0", "clean path"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &specs.Spec{Linux: &specs.Linux{Devices: tc.devices, Resources: &specs.LinuxResources{Devices: tc.rules}}}
			got, err := Allocated(s, inv)
			if tc.err != nil {
				if err == nil || !errdefs.IsInvalidArgument(err) {
					t.Fatalf("Allocated = %q, %v; want an InvalidArgument error", got, err)
				}
				for _, w := range tc.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Allocated = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if got, err := Allocated(&specs.Spec{}, inv); got != nil || err != nil {
		t.Errorf("Allocated(no linux section) = %q, %v", got, err)
	}
}
