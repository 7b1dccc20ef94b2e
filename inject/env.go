package inject

import (
	"fmt"
	"sort"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
)

// Env sets environment variables of the container's process, replacing
// earlier values of the same names. Vars are applied in name order.
type Env struct {
	Vars map[string]string
}

// Name implements Modifier.
func (Env) Name() string { return "env" }

// Modify implements Modifier.
func (m Env) Modify(s *specs.Spec) error {
	if s.Process == nil {
		return fmt.Errorf("spec has no process: %w", errdefs.ErrInvalidArgument)
	}
	names := make([]string, 0, len(m.Vars))
	for k := range m.Vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		kv := k + "=" + m.Vars[k]
		replaced := false
		for i, e := range s.Process.Env {
			if strings.HasPrefix(e, k+"=") {
				s.Process.Env[i] = kv
				replaced = true
			}
		}
		if !replaced {
			s.Process.Env = append(s.Process.Env, kv)
		}
	}
	return nil
}
