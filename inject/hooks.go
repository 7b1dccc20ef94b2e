package inject

import (
	"strings"

	"github.com/opencontainers/runtime-spec/specs-go"
)

// HookTimeout bounds each swift-hook run, in seconds; runc kills a hook
// past it and fails the container's create.
const HookTimeout = 10

// Hooks makes swift-hook the container's poststop hook (release: its
// lease given back if the shim did not) and, with NetCheck, its
// createRuntime hook (netcheck: RDMA checked from inside the container's
// network namespace). Entries of the same binary already in the spec (a
// retried Create) are replaced; other hooks are kept, ours last.
type Hooks struct {
	Path       string   // swift-hook on the node
	Devices    []string // the devices netcheck checks (Plan fills them in)
	SysRoot    string   // the node config's rdma.sys_root
	ConfigPath string   // the node config release reads
	NetCheck   bool
}

// Name implements Modifier.
func (Hooks) Name() string { return "hooks" }

// Modify implements Modifier.
func (m Hooks) Modify(s *specs.Spec) error {
	if s.Hooks == nil {
		s.Hooks = &specs.Hooks{}
	}
	t := HookTimeout
	s.Hooks.CreateRuntime = m.without(s.Hooks.CreateRuntime)
	if m.NetCheck {
		s.Hooks.CreateRuntime = append(s.Hooks.CreateRuntime, specs.Hook{Path: m.Path,
			Args:    []string{"swift-hook", "netcheck", "--devices", strings.Join(m.Devices, ","), "--sys-root", m.SysRoot},
			Timeout: &t})
	}
	s.Hooks.Poststop = append(m.without(s.Hooks.Poststop), specs.Hook{Path: m.Path,
		Args: []string{"swift-hook", "release", "--config", m.ConfigPath}, Timeout: &t})
	return nil
}

func (m Hooks) without(hs []specs.Hook) []specs.Hook {
	var out []specs.Hook
	for _, h := range hs {
		if h.Path != m.Path {
			out = append(out, h)
		}
	}
	return out
}
