package harness

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// DaemonVersion runs `containerd --version` and returns the version it
// reports (e.g. "2.4.2+unknown" or "v1.7.35") and its major number.
func DaemonVersion(ctx context.Context, containerd string) (string, int, error) {
	out, err := exec.CommandContext(ctx, containerd, "--version").Output()
	if err != nil {
		return "", 0, fmt.Errorf("%s --version: %w", containerd, err)
	}
	version, major, err := ParseVersion(string(out))
	if err != nil {
		return "", 0, fmt.Errorf("%s --version: %w", containerd, err)
	}
	return version, major, nil
}

// ParseVersion reads `containerd --version` output: "containerd <module>
// <version> <revision>".
func ParseVersion(out string) (string, int, error) {
	f := strings.Fields(out)
	if len(f) < 3 || f[0] != "containerd" {
		return "", 0, fmt.Errorf("unexpected version output %q", strings.TrimSpace(out))
	}
	v := f[2]
	num, _, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	major, err := strconv.Atoi(num)
	if err != nil {
		return "", 0, fmt.Errorf("unexpected version %q in %q", v, strings.TrimSpace(out))
	}
	return v, major, nil
}
