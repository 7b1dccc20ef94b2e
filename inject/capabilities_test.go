package inject

import (
	"testing"

	"github.com/opencontainers/runtime-spec/specs-go"
)

func TestDropCapabilities(t *testing.T) {
	net := []string{"CAP_NET_ADMIN", "CAP_NET_RAW"}
	runModCases(t, []modCase{
		{
			name: "every set loses them",
			mod:  DropCapabilities{Caps: net},
			in: func() *specs.Spec {
				all := func() []string { return []string{"CAP_CHOWN", "CAP_NET_RAW", "CAP_NET_ADMIN", "CAP_KILL"} }
				return &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{
					Bounding: all(), Effective: all(), Inheritable: all(), Permitted: all(), Ambient: []string{"CAP_NET_RAW"}}}}
			},
			want: &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{
				Bounding: []string{"CAP_CHOWN", "CAP_KILL"}, Effective: []string{"CAP_CHOWN", "CAP_KILL"},
				Inheritable: []string{"CAP_CHOWN", "CAP_KILL"}, Permitted: []string{"CAP_CHOWN", "CAP_KILL"}, Ambient: []string{}}}},
		},
		{
			// crun reads names through libcap: any case, with or without CAP_
			name: "however they are spelled",
			mod:  DropCapabilities{Caps: net},
			in: func() *specs.Spec {
				return &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{
					Bounding: []string{"cap_net_raw", "net_admin", "Cap_Net_Raw", "CAP_CHOWN"}}}}
			},
			want: &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN"}}}},
		},
		{
			name: "no capabilities: nothing to take",
			mod:  DropCapabilities{Caps: net},
			in:   func() *specs.Spec { return &specs.Spec{Process: &specs.Process{Args: []string{"sh"}}} },
			want: &specs.Spec{Process: &specs.Process{Args: []string{"sh"}}},
		},
		{
			name: "no process",
			mod:  DropCapabilities{Caps: net},
			in:   func() *specs.Spec { return &specs.Spec{Hostname: "c"} },
			want: &specs.Spec{Hostname: "c"},
		},
	})
	c := &specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN", "cap_net_raw"}}
	if !DropFrom(c, net) || DropFrom(c, net) || DropFrom(nil, net) {
		t.Errorf("DropFrom tells a removal: want true once, then false, and false for nil")
	}
	if got := (DropCapabilities{}).Name(); got != "capabilities" {
		t.Errorf("Name() = %q", got)
	}
}
