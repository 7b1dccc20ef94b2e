//go:build e2e

package harness

import "testing"

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		out, version string
		major        int
	}{
		{"containerd github.com/containerd/containerd/v2 2.4.2+unknown \n", "2.4.2+unknown", 2},
		{"containerd github.com/containerd/containerd 1.7.35+unknown \n", "1.7.35+unknown", 1},
		{"containerd github.com/containerd/containerd v1.7.35 1b2c3d4\n", "v1.7.35", 1},
		// Debian's packages (trixie, sid).
		{"containerd github.com/containerd/containerd 1.7.24~ds1 1.7.24~ds1-6+deb13u1\n", "1.7.24~ds1", 1},
		{"containerd github.com/containerd/containerd/v2 2.1.9+unknown \n", "2.1.9+unknown", 2},
	} {
		v, m, err := ParseVersion(c.out)
		if err != nil || v != c.version || m != c.major {
			t.Errorf("ParseVersion(%q) = %q, %d, %v; want %q, %d", c.out, v, m, err, c.version, c.major)
		}
	}
	for _, bad := range []string{"", "ctr github.com/containerd/containerd 1.7.35", "containerd x vX.Y"} {
		if _, _, err := ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q): no error", bad)
		}
	}
}
