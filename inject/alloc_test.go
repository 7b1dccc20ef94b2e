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
	inv.MAD = []rdma.Node{{Path: "/dev/infiniband/umad0", Major: 231, Minor: 0}}
	tests := []struct {
		name    string
		devices []specs.LinuxDevice
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
			name:    "a umad node of the node is an RDMA node but no verbs device",
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/umad0", Type: "c", Major: 231, Minor: 0}, {Path: "/dev/infiniband/uverbs0", Type: "c", Major: 231, Minor: 192}},
			want:    []string{"rxe0"},
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
			err:     []string{"/dev/infiniband/uverbs7", "c 231:199", "not an RDMA device on this node", "uverbs0 c 231:192 (rxe0)", "rdma_cm c 10:58", "umad0 c 231:0"},
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
			devices: []specs.LinuxDevice{{Path: "/dev/infiniband/../infiniband/uverbs9", Type: "c", Major: 1, Minor: 3}},
			err:     []string{"uverbs9", "c 1:3", "not an RDMA device"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &specs.Spec{Linux: &specs.Linux{Devices: tc.devices}}
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
