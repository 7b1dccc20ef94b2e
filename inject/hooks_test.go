package inject

import (
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"
)

func intp(v int) *int { return &v }

func TestHooks(t *testing.T) {
	h := Hooks{Path: "/usr/local/bin/swift-hook", Devices: []string{"rxe0", "rxe1"}, SysRoot: "/", ConfigPath: "/etc/swift/config.toml", NetCheck: true}
	netcheck := specs.Hook{Path: "/usr/local/bin/swift-hook", Args: []string{"swift-hook", "netcheck", "--devices", "rxe0,rxe1", "--sys-root", "/"}, Timeout: intp(10)}
	release := specs.Hook{Path: "/usr/local/bin/swift-hook", Args: []string{"swift-hook", "release", "--config", "/etc/swift/config.toml"}, Timeout: intp(10)}
	nri := specs.Hook{Path: "/usr/bin/nri-hook", Args: []string{"nri-hook", "x"}}
	noCheck := h
	noCheck.NetCheck = false
	runModCases(t, []modCase{
		{
			name: "no hooks yet",
			mod:  h,
			in:   func() *specs.Spec { return &specs.Spec{} },
			want: &specs.Spec{Hooks: &specs.Hooks{CreateRuntime: []specs.Hook{netcheck}, Poststop: []specs.Hook{release}}},
		},
		{
			name: "the platform's hooks kept, ours last",
			mod:  h,
			in: func() *specs.Spec {
				return &specs.Spec{Hooks: &specs.Hooks{CreateRuntime: []specs.Hook{nri}, Poststop: []specs.Hook{nri}, StartContainer: []specs.Hook{nri}}}
			},
			want: &specs.Spec{Hooks: &specs.Hooks{CreateRuntime: []specs.Hook{nri, netcheck}, Poststop: []specs.Hook{nri, release}, StartContainer: []specs.Hook{nri}}},
		},
		{
			name: "a retried Create's entries (stale arguments) replaced",
			mod:  h,
			in: func() *specs.Spec {
				old := netcheck
				old.Args = []string{"swift-hook", "netcheck", "--devices", "rxe9"}
				return &specs.Spec{Hooks: &specs.Hooks{CreateRuntime: []specs.Hook{old, nri}, Poststop: []specs.Hook{release}}}
			},
			want: &specs.Spec{Hooks: &specs.Hooks{CreateRuntime: []specs.Hook{nri, netcheck}, Poststop: []specs.Hook{release}}},
		},
		{
			name: "a swift-hook at another path or hook point is dropped",
			mod:  h,
			in: func() *specs.Spec {
				early := specs.Hook{Path: "/opt/x/../bin/swift-hook", Args: []string{"swift-hook", "release", "--config", "/etc/swift/config.toml"}}
				//nolint:staticcheck // Prestart is deprecated, but runtimes still run it
				return &specs.Spec{Hooks: &specs.Hooks{Prestart: []specs.Hook{early, nri}, StartContainer: []specs.Hook{early}, CreateContainer: []specs.Hook{early},
					Poststart: []specs.Hook{early}, CreateRuntime: []specs.Hook{early}}}
			},
			//nolint:staticcheck // Prestart is deprecated, but runtimes still run it
			want: &specs.Spec{Hooks: &specs.Hooks{Prestart: []specs.Hook{nri}, CreateRuntime: []specs.Hook{netcheck}, Poststop: []specs.Hook{release}}},
		},
		{
			name: "exclusive_move passes --move",
			mod:  Hooks{Path: h.Path, Devices: h.Devices, SysRoot: "/", ConfigPath: h.ConfigPath, NetCheck: true, Move: true},
			in:   func() *specs.Spec { return &specs.Spec{} },
			want: &specs.Spec{Hooks: &specs.Hooks{CreateRuntime: []specs.Hook{{Path: netcheck.Path,
				Args: append(append([]string{}, netcheck.Args...), "--move"), Timeout: intp(10)}}, Poststop: []specs.Hook{release}}},
		},
		{
			name: "netcheck off: release only",
			mod:  noCheck,
			in:   func() *specs.Spec { return &specs.Spec{} },
			want: &specs.Spec{Hooks: &specs.Hooks{Poststop: []specs.Hook{release}}},
		},
	})
}
