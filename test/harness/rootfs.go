package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BusyboxPath is Debian busybox-static's binary.
const BusyboxPath = "/bin/busybox"

// BuildRootfs makes a minimal container root filesystem in dir: the static
// busybox with a link per applet, and the directories runc expects.
func BuildRootfs(dir string) error {
	for _, d := range []string{"bin", "dev", "proc", "sys", "tmp", "etc", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	dst := filepath.Join(dir, "bin", "busybox")
	data, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return fmt.Errorf("read %s (Debian busybox-static): %w", BusyboxPath, err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		return err
	}
	out, err := exec.Command(dst, "--list").Output()
	if err != nil {
		return fmt.Errorf("%s --list: %w", dst, err)
	}
	for _, applet := range strings.Fields(string(out)) {
		link := filepath.Join(dir, "bin", applet)
		if applet == "busybox" {
			continue
		}
		if err := os.Symlink("busybox", link); err != nil && !os.IsExist(err) {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "etc", "passwd"), []byte("root:x:0:0:root:/:/bin/sh\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "etc", "group"), []byte("root:x:0:\n"), 0o644)
}
