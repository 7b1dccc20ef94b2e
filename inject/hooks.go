package inject

import (
	"path/filepath"
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
	// Move lets netcheck move the devices into the container's network
	// namespace in RDMA netns exclusive mode (hooks.exclusive_move).
	Move bool
}

// Name implements Modifier.
func (Hooks) Name() string { return "hooks" }

// Modify implements Modifier.
func (m Hooks) Modify(s *specs.Spec) error {
	if s.Hooks == nil {
		s.Hooks = &specs.Hooks{}
	}
	t := HookTimeout
	h := s.Hooks
	// a swift-hook anywhere else (another spelling of its path, another
	// hook point) could release the lease early or skip a check: ours only
	//nolint:staticcheck // Prestart is deprecated, but runtimes still run it: a swift-hook there must go too
	for _, l := range []*[]specs.Hook{&h.Prestart, &h.CreateRuntime, &h.CreateContainer, &h.StartContainer, &h.Poststart, &h.Poststop} {
		*l = m.without(*l)
	}
	if m.NetCheck {
		args := []string{"swift-hook", "netcheck", "--devices", strings.Join(m.Devices, ","), "--sys-root", m.SysRoot}
		if m.Move {
			args = append(args, "--move")
		}
		s.Hooks.CreateRuntime = append(s.Hooks.CreateRuntime, specs.Hook{Path: m.Path, Args: args, Timeout: &t})
	}
	s.Hooks.Poststop = append(s.Hooks.Poststop, specs.Hook{Path: m.Path,
		Args: []string{"swift-hook", "release", "--config", m.ConfigPath}, Timeout: &t})
	return nil
}

// without drops the entries that run swift-hook: our path, or any path
// whose file name is swift-hook's (a symlink or another copy).
func (m Hooks) without(hs []specs.Hook) []specs.Hook {
	var out []specs.Hook
	for _, h := range hs {
		if filepath.Clean(h.Path) != filepath.Clean(m.Path) && filepath.Base(h.Path) != filepath.Base(m.Path) {
			out = append(out, h)
		}
	}
	return out
}
