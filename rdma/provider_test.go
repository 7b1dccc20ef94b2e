package rdma

import (
	"os"
	"path/filepath"
	"testing"
)

func TestProvider(t *testing.T) {
	root := t.TempDir()
	dev := func(name string, files map[string]string, driverLink string) {
		dir := filepath.Join(root, "sys/class/infiniband", name)
		if err := os.MkdirAll(filepath.Join(dir, "device"), 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if driverLink != "" {
			if err := os.Symlink(driverLink, filepath.Join(dir, "device/driver")); err != nil {
				t.Fatal(err)
			}
		}
	}
	dev("mlx5_0", map[string]string{"node_type": "1: CA"}, "../../../../bus/pci/drivers/mlx5_core")
	dev("rxe0", map[string]string{"node_type": "1: CA", "parent": "eth0"}, "")
	dev("swp4026532232", map[string]string{"node_type": "1: CA", "parent": "eth0"}, "")
	dev("roce7", map[string]string{"node_type": "4: RNIC", "parent": "eth1"}, "")
	dev("hfi1_0", map[string]string{"node_type": "1: CA"}, "")
	for _, tc := range []struct{ name, driver, source, mode string }{
		{"mlx5_0", "mlx5_core", "device/driver", ShareBuffers},
		{"rxe0", "rxe", "parent netdev, node type CA", ShareRelay},
		{"swp4026532232", "rxe", "parent netdev, node type CA", ShareRelay},
		{"roce7", "siw", "parent netdev, node type RNIC", ShareRelay},
		{"hfi1_0", "hfi1", "name prefix", ShareOwn},
		{"siw0", "siw", "name prefix", ShareRelay}, // no sysfs at all
	} {
		d, s, m := Provider(root, tc.name)
		if d != tc.driver || s != tc.source || m != tc.mode {
			t.Errorf("Provider(%s) = %q, %q, %q; want %q, %q, %q", tc.name, d, s, m, tc.driver, tc.source, tc.mode)
		}
	}
}
