package inject

import (
	"net/netip"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/annotations"
)

// TestPoolConfigRender: options in, swift-init's pool description out.
func TestPoolConfigRender(t *testing.T) {
	head := "# written by the Swift shim; read by " + ZygoteInit + "\n"
	tail := "socket " + ZygoteSocket + "\nkey_pipe 100\n"
	tests := []struct {
		name string
		pc   PoolConfig
		want string
	}{
		{"defaults", NewPoolConfig("c1", annotations.Options{}),
			head + "name c1\ntenant " + DefaultTenant + "\npool 1\nlisten 0.0.0.0:18515\n" + tail},
		{"peers and device", PoolConfig{Name: "a", Tenant: "t1", Device: "rxe0", Pool: 4, ListenHost: "10.0.2.15", ListenPort: 18516,
			Peers: []annotations.Peer{{Name: "b", Host: "10.0.2.15", Port: 18517}, {Name: "c", Host: "host-c", Port: 1}}},
			head + "name a\ntenant t1\ndevice rxe0\npool 4\nlisten 10.0.2.15:18516\n" + tail +
				"peer b 10.0.2.15:18517\npeer c host-c:1\n"},
		{"tenant peer networks", PoolConfig{Name: "a", Tenant: "t1", Pool: 1, ListenHost: "0.0.0.0", ListenPort: 18515,
			AcceptOnly: true, Accept: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.2.3/16"), netip.MustParsePrefix("fd00::/8")}},
			head + "name a\ntenant t1\npool 1\nlisten 0.0.0.0:18515\n" + tail +
				"accept 10.0.0.0/8\naccept 10.1.0.0/16\naccept fd00::/8\n"},
		{"tenant allows no peer", PoolConfig{Name: "a", Tenant: "t1", Pool: 1, ListenHost: "0.0.0.0", ListenPort: 18515, AcceptOnly: true},
			head + "name a\ntenant t1\npool 1\nlisten 0.0.0.0:18515\n" + tail + "accept none\n"},
		{"remote access", NewPoolConfig("c1", annotations.Options{RemoteAccess: true}),
			head + "name c1\ntenant " + DefaultTenant + "\npool 1\nlisten 0.0.0.0:18515\n" + tail + "remote_access 1\n"},
		{"QP limit", PoolConfig{Name: "a", Tenant: "t1", Pool: 1, ListenHost: "0.0.0.0", ListenPort: 18515, QPLimit: 6},
			head + "name a\ntenant t1\npool 1\nlisten 0.0.0.0:18515\n" + tail + "qp_limit 6\n"},
		{"function uids", PoolConfig{Name: "a", Tenant: "t1", Pool: 1, ListenHost: "0.0.0.0", ListenPort: 18515, FunctionUIDBase: 2000000000},
			head + "name a\ntenant t1\npool 1\nlisten 0.0.0.0:18515\n" + tail + "function_uids 2000000000\n"},
		{"tenant peer rules to dial", PoolConfig{Name: "a", Tenant: "t1", Pool: 1, ListenHost: "0.0.0.0", ListenPort: 18515,
			DialOnly: true, Dial: []DialRule{{netip.MustParsePrefix("10.1.2.3/16"), 18515, 18600}, {netip.MustParsePrefix("192.168.7.9/32"), 1, 65535}}},
			head + "name a\ntenant t1\npool 1\nlisten 0.0.0.0:18515\n" + tail +
				"dial 10.1.0.0/16 18515-18600\ndial 192.168.7.9/32 1-65535\n"},
		{"tenant allows dialing no peer", PoolConfig{Name: "a", Tenant: "t1", Pool: 1, ListenHost: "0.0.0.0", ListenPort: 18515, DialOnly: true},
			head + "name a\ntenant t1\npool 1\nlisten 0.0.0.0:18515\n" + tail + "dial none\n"},
		{"accept list without AcceptOnly is not written", PoolConfig{Name: "a", Tenant: "t1", Pool: 1, ListenHost: "0.0.0.0", ListenPort: 18515,
			Accept: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
			head + "name a\ntenant t1\npool 1\nlisten 0.0.0.0:18515\n" + tail},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.pc.Render()); got != tc.want {
				t.Errorf("Render:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestDefaultName: a zygote without swift.io/name is named after its pod
// and container under CRI, else its ID; cut to a DNS label with a hash of
// the whole when it is not one.
func TestDefaultName(t *testing.T) {
	cri := func(pod, ctr string) map[string]string {
		return map[string]string{annotations.CRISandboxName: pod, annotations.CRIContainerName: ctr}
	}
	tests := []struct {
		name string
		id   string
		ann  map[string]string
		want string
	}{
		{"ctr id that is a label", "zyg-a", nil, "zyg-a"},
		{"pod and container", "3f2a", cri("web-0", "worker"), "web-0-worker"},
		{"CRI id of 64 hex, no pod", "3f2a0c9e8b7d6f5e4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a29180706050", nil,
			"3f2a0c9e8b7d6f5e4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a2-4431735f"},
		{"pod name not a label", "x", cri("web-7d9f_x", "worker"), "web-7d9f-x-worker-c9d94de1"},
		{"upper case and dots", "x", cri("My.Pod", "worker"), "my-pod-worker-2be250e1"},
		{"nothing left of the name", "___", nil, "z-bda25155"},
		{"too long", "x", cri("a-very-long-pod-name-from-a-deployment-with-a-replicaset-hash-x8k2p", "worker"),
			"a-very-long-pod-name-from-a-deployment-with-a-replicas-04a46f8c"},
		{"pod without container name", "zyg-b", map[string]string{annotations.CRISandboxName: "web-0"}, "zyg-b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := DefaultName(tc.id, tc.ann)
			if got != tc.want {
				t.Errorf("DefaultName(%q, %v) = %q, want %q", tc.id, tc.ann, got, tc.want)
			}
			if !annotations.IsLabel(got) {
				t.Errorf("DefaultName(%q, %v) = %q, not a DNS label", tc.id, tc.ann, got)
			}
		})
	}
}

// TestZygoteModify: the zygote's mounts, args and socket variable; the
// shim's mounts win over a container's own at the zygote's paths, and an
// entrypoint that already is swift-init is refused.
func TestZygoteModify(t *testing.T) {
	z := Zygote{BinDir: "/usr/local/lib/swift", ConfPath: "/run/b/swift-pool.conf"}
	ro := []string{"rbind", "ro", "nosuid", "nodev"}
	ours := []specs.Mount{
		{Destination: "/.swift/bin", Type: "bind", Source: "/usr/local/lib/swift", Options: ro},
		{Destination: "/.swift/pool.conf", Type: "bind", Source: "/run/b/swift-pool.conf", Options: ro},
		{Destination: "/run/swift", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec", "mode=0755", "size=1m"}},
	}
	run := specs.Mount{Destination: "/run", Type: "tmpfs", Source: "tmpfs"}
	verbsMount := specs.Mount{Destination: "/.swift/verbs", Type: "bind", Source: "/var/lib/swift/verbs/x", Options: ro}
	spec := func(args []string, mounts ...specs.Mount) func() *specs.Spec {
		return func() *specs.Spec {
			return &specs.Spec{Process: &specs.Process{Args: args, Env: []string{"PATH=/bin"}}, Mounts: append([]specs.Mount{}, mounts...)}
		}
	}
	wrapped := []string{"/.swift/bin/swift-init", "--config", "/.swift/pool.conf", "--", "sleep", "9"}
	env := []string{"PATH=/bin", "SWIFT_NETWORK=node", "SWIFT_SOCKET=/run/swift/zygote.sock"}
	podNet := &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.NetworkNamespace, Path: "/var/run/netns/cni-1"}}}
	bad := func(what ...string) []string { return append([]string{"the shim's mounts win"}, what...) }
	runModCases(t, []modCase{
		{name: "plain", mod: z, in: spec([]string{"sleep", "9"}),
			want: &specs.Spec{Process: &specs.Process{Args: wrapped, Env: env}, Mounts: ours}},
		{name: "a non-root zygote: its own socket dir",
			mod: Zygote{BinDir: "/usr/local/lib/swift", ConfPath: "/run/b/swift-pool.conf",
				Owner: &[2]uint32{1000, 1001}},
			in: spec([]string{"sleep", "9"}),
			want: &specs.Spec{Process: &specs.Process{Args: wrapped, Env: env}, Mounts: []specs.Mount{
				ours[0], ours[1],
				{Destination: "/run/swift", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "noexec", "mode=0755", "size=1m", "uid=1000", "gid=1001"}},
			}}},
		{name: "a pod's network: SWIFT_NETWORK=pod", mod: z,
			in: func() *specs.Spec { s := spec([]string{"sleep", "9"})(); s.Linux = podNet; return s },
			want: &specs.Spec{Process: &specs.Process{Args: wrapped, Env: []string{"PATH=/bin", "SWIFT_NETWORK=pod", "SWIFT_SOCKET=/run/swift/zygote.sock"}},
				Mounts: ours, Linux: podNet}},
		{name: "a parent mount (/run) stays before the zygote's", mod: z, in: spec([]string{"sleep", "9"}, run),
			want: &specs.Spec{Process: &specs.Process{Args: wrapped, Env: env}, Mounts: append([]specs.Mount{run}, ours...)}},
		{name: "the verbs cache's mount is not the zygote's to refuse", mod: z, in: spec([]string{"sleep", "9"}, verbsMount),
			want: &specs.Spec{Process: &specs.Process{Args: wrapped, Env: env}, Mounts: append([]specs.Mount{verbsMount}, ours...)}},
		{name: "container's own pool description", mod: z, err: errdefs.IsInvalidArgument,
			in:  spec([]string{"sleep", "9"}, specs.Mount{Destination: "/.swift/pool.conf", Type: "bind", Source: "/tmp/mine.conf", Options: ro}),
			msg: bad(`the container mounts /.swift/pool.conf (from "/tmp/mine.conf")`)},
		{name: "a file of the container's where the key once was", mod: z, err: errdefs.IsInvalidArgument,
			in:  spec([]string{"sleep", "9"}, specs.Mount{Destination: "/.swift/tenant.keys", Type: "bind", Source: "/tmp/k", Options: ro}),
			msg: bad("/.swift/tenant.keys")},
		{name: "container's own /.swift", mod: z, err: errdefs.IsInvalidArgument,
			in: spec([]string{"sleep", "9"}, specs.Mount{Destination: "/.swift", Type: "bind", Source: "/tmp/d"}), msg: bad("/.swift (from")},
		{name: "container's own binaries, path not clean", mod: z, err: errdefs.IsInvalidArgument,
			in: spec([]string{"sleep", "9"}, specs.Mount{Destination: "//.swift/./bin/", Type: "bind", Source: "/tmp/b"}), msg: bad("//.swift/./bin/")},
		{name: "container's own socket dir", mod: z, err: errdefs.IsInvalidArgument,
			in: spec([]string{"sleep", "9"}, specs.Mount{Destination: "/run/swift/zygote.sock", Type: "bind", Source: "/tmp/s"}), msg: bad("/run/swift/zygote.sock")},
		{name: "one of ours with another of the container's", mod: z, err: errdefs.IsInvalidArgument,
			in: spec(wrapped, ours[0], specs.Mount{Destination: "/.swift/pool.conf", Type: "bind", Source: "/tmp/mine.conf", Options: ro}), msg: bad("/.swift/pool.conf")},
		{name: "some of ours only, args wrapped", mod: z, err: errdefs.IsInvalidArgument,
			in: spec(wrapped, ours[0], ours[1]), msg: []string{"is swift-init already"}},
		// copies of the shim's own mounts do not make a spec look edited
		{name: "one of ours three times, args wrapped", mod: z, err: errdefs.IsInvalidArgument,
			in: spec(wrapped, ours[2], ours[2], ours[2]), msg: []string{"is swift-init already"}},
		{name: "all but the pool description, one twice, args wrapped", mod: z, err: errdefs.IsInvalidArgument,
			in: spec(wrapped, ours[0], ours[2], ours[2]), msg: []string{"is swift-init already"}},
		{name: "some of ours, plain args: taken out and appended once", mod: z, in: spec([]string{"sleep", "9"}, ours[2], run, ours[0]),
			want: &specs.Spec{Process: &specs.Process{Args: wrapped, Env: env}, Mounts: append([]specs.Mount{run}, ours...)}},
		{name: "edited before with a mount after ours: ours last again", mod: z,
			in:   spec(wrapped, ours[0], ours[1], ours[2], specs.Mount{Destination: "/data", Type: "bind", Source: "/d"}),
			want: &specs.Spec{Process: &specs.Process{Args: wrapped, Env: env}, Mounts: append([]specs.Mount{{Destination: "/data", Type: "bind", Source: "/d"}}, ours...)}},
		{name: "entrypoint is swift-init", mod: z, err: errdefs.IsInvalidArgument,
			in: spec([]string{"/.swift/bin/swift-init", "--config", "/tmp/mine.conf", "--", "sh"}), msg: []string{`entrypoint "/.swift/bin/swift-init" is swift-init already`}},
		{name: "entrypoint is another swift-init", mod: z, err: errdefs.IsInvalidArgument,
			in: spec([]string{"/opt/swift-init", "sh"}), msg: []string{`entrypoint "/opt/swift-init" is swift-init already`}},
		{name: "wrapped args without the zygote's mounts", mod: z, err: errdefs.IsInvalidArgument,
			in: spec(wrapped), msg: []string{"is swift-init already"}},
	})
}
