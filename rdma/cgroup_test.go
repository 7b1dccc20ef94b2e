package rdma

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupAvailable(t *testing.T) {
	type file struct{ path, content string }
	tests := []struct {
		name  string
		files []file
		dirs  []string
		want  bool
	}{
		{"v2 with rdma", []file{{"cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n"}}, nil, true},
		{"v2 rdma first", []file{{"cgroup.controllers", "rdma cpu"}}, nil, true},
		{"v2 without rdma", []file{{"cgroup.controllers", "cpuset cpu io memory hugetlb pids misc\n"}}, nil, false},
		{"v2 lookalike names", []file{{"cgroup.controllers", "rdmax xrdma rdma.max\n"}}, nil, false},
		{"v2 no controllers", []file{{"cgroup.controllers", ""}}, nil, false},
		// On v2 the controllers list decides, even if a child cgroup is called rdma.
		{"v2 child named rdma", []file{{"cgroup.controllers", "cpu memory"}, {"rdma/rdma.max", ""}}, []string{"rdma"}, false},
		{"v1 rdma hierarchy with rdma.max", []file{{"rdma/rdma.max", ""}, {"memory/memory.limit_in_bytes", ""}}, nil, true},
		{"v1 rdma root directory only", nil, []string{"rdma", "memory", "cpu,cpuacct"}, true},
		{"v1 without rdma", nil, []string{"memory", "cpu,cpuacct", "devices"}, false},
		{"rdma is a file", []file{{"rdma", ""}}, nil, false},
		{"nothing", nil, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range tc.dirs {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range tc.files {
				p := filepath.Join(root, f.path)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(f.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := CgroupAvailable(root); got != tc.want {
				t.Fatalf("CgroupAvailable = %v, want %v", got, tc.want)
			}
		})
	}
	if CgroupAvailable(filepath.Join(t.TempDir(), "absent")) {
		t.Error("CgroupAvailable(missing root) = true")
	}
}
