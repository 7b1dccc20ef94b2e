package inject

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path"
	"reflect"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/annotations"
)

// Paths of the zygote inside the container.
const (
	ZygoteDir    = "/.swift"
	ZygoteBinDir = ZygoteDir + "/bin"
	ZygoteInit   = ZygoteBinDir + "/swift-init"
	ZygoteConf   = ZygoteDir + "/pool.conf"
	ZygoteRunDir = "/run/swift"
	ZygoteSocket = ZygoteRunDir + "/zygote.sock"
	EnvSocket    = "SWIFT_SOCKET"
	// EnvNetwork tells the container's processes whose network they are
	// on: "pod" (a network namespace of its own or its pod's) or "node"
	// (the node's, as hostNetwork pods and ctr --net-host are).
	// swift-gateway listens on the node's addresses only when told to.
	EnvNetwork    = "SWIFT_NETWORK"
	DefaultListen = 18515
	DefaultTenant = "default"
	// KeyPipeFD is where swift-init keeps the write end of the pipe the
	// shim hands the zygote's pair keys over (key_pipe in the pool
	// description): the shim takes a copy of it from the container's init
	// process, so no path in the container leads to the keys.
	KeyPipeFD = 100
)

// Zygote makes swift-init the container's init: it mounts the node's
// Swift binaries and the pool description read-only, gives the zygote a
// tmpfs for its socket, and wraps process.args. No key is mounted: the
// shim hands the zygote's pair keys to the init process (KeyPipeFD).
type Zygote struct {
	BinDir   string // host directory with swift-init and swift-run
	ConfPath string // host path of the pool description
	// Owner, when set, is the container's user (uid, gid), which owns
	// the zygote's socket directory: a zygote that does not run as root.
	Owner *[2]uint32
}

// Name implements Modifier.
func (Zygote) Name() string { return "zygote" }

// mounts are the zygote's mounts, in order.
func (m Zygote) mounts() []specs.Mount {
	ro := []string{"rbind", "ro", "nosuid", "nodev"}
	run := []string{"nosuid", "nodev", "noexec", "mode=0755", "size=1m"}
	if m.Owner != nil {
		run = append(run, fmt.Sprintf("uid=%d", m.Owner[0]), fmt.Sprintf("gid=%d", m.Owner[1]))
	}
	return []specs.Mount{
		{Destination: ZygoteBinDir, Type: "bind", Source: m.BinDir, Options: ro},
		{Destination: ZygoteConf, Type: "bind", Source: m.ConfPath, Options: ro},
		{Destination: ZygoteRunDir, Type: "tmpfs", Source: "tmpfs", Options: run},
	}
}

// under tells whether container path p is at or below one of roots.
func under(p string, roots []string) bool {
	p = path.Clean("/" + p)
	for _, d := range roots {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// claimMounts gives the shim the container paths at or below roots
// (except those at or below except, which another modifier claims): any
// mount there that is not one of want, the shim's, is refused
// (InvalidArgument, naming it), so that a container cannot put its own
// files where the shim's go; copies of the shim's own (a retried Create)
// are taken out; then want is appended, after every mount of the
// container. ours tells whether the spec held all of want already.
func claimMounts(s *specs.Spec, what string, want []specs.Mount, roots, except []string) (ours bool, err error) {
	seen := make([]bool, len(want))
	kept := s.Mounts[:0:0]
	for _, x := range s.Mounts {
		if !under(x.Destination, roots) || under(x.Destination, except) {
			kept = append(kept, x)
			continue
		}
		i := slices.IndexFunc(want, func(w specs.Mount) bool { return reflect.DeepEqual(w, x) })
		if i < 0 {
			return false, fmt.Errorf("the container mounts %s (from %q) where the shim puts %s (%s): the shim's mounts win, remove it: %w",
				x.Destination, x.Source, what, strings.Join(roots, ", "), errdefs.ErrInvalidArgument)
		}
		seen[i] = true
	}
	s.Mounts = append(kept, want...)
	return !slices.Contains(seen, false), nil
}

// Modify implements Modifier. The shim's mounts win: a container mount at
// or below /.swift or /run/swift (other than the verbs cache's, which
// Verbs claims), or an entrypoint that is swift-init already, would take
// over the pool description, the key or the binaries, and is refused
// (InvalidArgument). The shim's mounts go after every mount of the
// container. A spec this modifier edited before (a retried Create) keeps
// its wrapped args and gets the same mounts again. (An entrypoint that
// starts swift-init some other way, through a symlink or a shell, gets no
// key: the shim hands it only to the container's init process.)
func (m Zygote) Modify(s *specs.Spec) error {
	if s.Process == nil || len(s.Process.Args) == 0 {
		return fmt.Errorf("spec has no process args to run under the zygote: %w", errdefs.ErrInvalidArgument)
	}
	args := s.Process.Args
	wrapped := len(args) > 4 && args[0] == ZygoteInit && args[1] == "--config" && args[2] == ZygoteConf && args[3] == "--"
	if path.Base(args[0]) == path.Base(ZygoteInit) && !wrapped {
		return fmt.Errorf("the container's entrypoint %q is swift-init already: the shim starts the zygote itself (swift.io/zygote=true); run the function's command instead: %w",
			args[0], errdefs.ErrInvalidArgument)
	}
	ours, err := claimMounts(s, "the zygote's files", m.mounts(), []string{ZygoteDir, ZygoteRunDir}, []string{VerbsDir})
	if err != nil {
		return err
	}
	switch {
	case ours && wrapped:
		// edited before (a retried Create): the shim's mounts are the
		// last ones again, whatever the spec said
	case wrapped:
		return fmt.Errorf("the container's entrypoint %q is swift-init already: the shim starts the zygote itself (swift.io/zygote=true); run the function's command instead: %w",
			args[0], errdefs.ErrInvalidArgument)
	default:
		s.Process.Args = append([]string{ZygoteInit, "--config", ZygoteConf, "--"}, args...)
	}
	return Env{Vars: map[string]string{EnvSocket: ZygoteSocket, EnvNetwork: network(s)}}.Modify(s)
}

// network is EnvNetwork's value for s: "node" when it names no network
// namespace (it stays in the runtime's, the node's), else "pod".
func network(s *specs.Spec) string {
	if s.Linux != nil {
		for _, ns := range s.Linux.Namespaces {
			if ns.Type == specs.NetworkNamespace {
				return "pod"
			}
		}
	}
	return "node"
}

// PoolConfig is what swift-init reads from its pool description.
type PoolConfig struct {
	Name       string
	Tenant     string
	Device     string
	Pool       int
	ListenHost string
	ListenPort uint16
	Peers      []annotations.Peer
	// AcceptOnly restricts the exchange to connections from Accept: the
	// tenant's peer networks, when its policy restricts peers.
	AcceptOnly bool
	Accept     []netip.Prefix
	// DialOnly restricts the peers the zygote dials to addresses and
	// ports Dial allows: the tenant's IPv4 peer rules, when its policy
	// restricts peers (a peer named by a host name is checked once its
	// name resolves).
	DialOnly bool
	Dial     []DialRule
	// RemoteAccess lets the peers RDMA READ and WRITE the rows' slices.
	RemoteAccess bool
	// FunctionUIDBase: functions run as uid and gid base+slot (0: as the
	// container's user).
	FunctionUIDBase uint32
	// QPLimit is the most QPs the zygote holds at once (pool rows, rows
	// held for peers, rows on demand, its functions' own QPs): the QP
	// charge of a tenant with container.qps; 0: no limit.
	QPLimit uint64
}

// NewPoolConfig derives the pool description from a container's options;
// name names the zygote when swift.io/name is absent (see DefaultName).
func NewPoolConfig(name string, o annotations.Options) PoolConfig {
	pc := PoolConfig{Name: o.Name, Tenant: o.Tenant, Pool: o.Pool, ListenHost: o.ListenHost,
		ListenPort: o.ListenPort, Peers: o.Peers, RemoteAccess: o.RemoteAccess}
	if pc.Name == "" {
		pc.Name = name
	}
	if pc.Tenant == "" {
		pc.Tenant = DefaultTenant
	}
	if pc.Pool == 0 {
		pc.Pool = 1
	}
	if pc.ListenPort == 0 {
		pc.ListenHost, pc.ListenPort = "0.0.0.0", DefaultListen
	}
	if len(o.Devices) > 0 {
		pc.Device = o.Devices[0]
	}
	return pc
}

// InNamespace returns the pool description of a pod's zygote, whose names
// live in its Kubernetes namespace ns: its own name and each bare peer
// name are qualified, "name.ns"; a peer already qualified names a zygote
// of that namespace. A pod cannot take a name in another namespace: a
// qualified swift.io/name must be in ns. So a pod of another namespace
// cannot claim this one's names (nor prove them: its zygote gets the pair
// keys of its own names only), and pods of two namespaces whose default
// names are alike keep apart.
func (pc PoolConfig) InNamespace(ns string) (PoolConfig, error) {
	if !annotations.IsLabel(ns) {
		return pc, fmt.Errorf("the pod's namespace %q is not a DNS label: %w", ns, errdefs.ErrInvalidArgument)
	}
	name, own, qualified := strings.Cut(pc.Name, ".")
	if qualified && own != ns {
		return pc, fmt.Errorf("%s=%q: a pod's zygote is named in its own namespace %q: write the name without %q: %w",
			annotations.Name, pc.Name, ns, "."+own, errdefs.ErrInvalidArgument)
	}
	pc.Name = name + "." + ns
	peers := make([]annotations.Peer, len(pc.Peers))
	seen := map[string]bool{}
	for i, p := range pc.Peers {
		if !strings.Contains(p.Name, ".") {
			p.Name += "." + ns
		}
		if seen[p.Name] {
			return pc, fmt.Errorf("%s: peer %s is listed twice (with and without its namespace): %w",
				annotations.Peers, p.Name, errdefs.ErrInvalidArgument)
		}
		seen[p.Name] = true
		peers[i] = p
	}
	pc.Peers = peers
	return pc, nil
}

// Render writes the pool description in swift-init's "key value" format.
func (pc PoolConfig) Render() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by the Swift shim; read by %s\n", ZygoteInit)
	fmt.Fprintf(&b, "name %s\ntenant %s\n", pc.Name, pc.Tenant)
	if pc.Device != "" {
		fmt.Fprintf(&b, "device %s\n", pc.Device)
	}
	fmt.Fprintf(&b, "pool %d\nlisten %s:%d\nsocket %s\nkey_pipe %d\n", pc.Pool, pc.ListenHost, pc.ListenPort, ZygoteSocket, KeyPipeFD)
	for _, p := range pc.Peers {
		fmt.Fprintf(&b, "peer %s %s:%d\n", p.Name, p.Host, p.Port)
	}
	if pc.RemoteAccess {
		b.WriteString("remote_access 1\n")
	}
	if pc.FunctionUIDBase != 0 {
		fmt.Fprintf(&b, "function_uids %d\n", pc.FunctionUIDBase)
	}
	if pc.QPLimit != 0 {
		fmt.Fprintf(&b, "qp_limit %d\n", pc.QPLimit)
	}
	if pc.AcceptOnly {
		if len(pc.Accept) == 0 {
			b.WriteString("accept none\n")
		}
		for _, n := range pc.Accept {
			fmt.Fprintf(&b, "accept %s\n", n.Masked())
		}
	}
	if pc.DialOnly {
		if len(pc.Dial) == 0 {
			b.WriteString("dial none\n")
		}
		for _, r := range pc.Dial {
			fmt.Fprintf(&b, "dial %s %d-%d\n", r.Prefix.Masked(), r.MinPort, r.MaxPort)
		}
	}
	return []byte(b.String())
}

// DialRule is one network and port range a zygote may dial a peer at.
type DialRule struct {
	Prefix           netip.Prefix // IPv4
	MinPort, MaxPort uint16
}

// DefaultName is a zygote's name when swift.io/name is absent: under CRI
// "<pod>-<container>", else the container ID; as it is when that is a
// DNS label, else cut to fit with a hash of the whole appended, so that it
// stays unique per pod and container (CRI IDs are 64 hex characters, more
// than a name holds).
func DefaultName(id string, ann map[string]string) string {
	full := id
	if pod, ctr := ann[annotations.CRISandboxName], ann[annotations.CRIContainerName]; pod != "" && ctr != "" {
		full = pod + "-" + ctr
	}
	if annotations.IsLabel(full) {
		return full
	}
	var b strings.Builder
	for _, r := range strings.ToLower(full) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	sum := sha256.Sum256([]byte(full))
	head := strings.Trim(b.String(), "-")
	if len(head) > 63-9 {
		head = strings.TrimRight(head[:63-9], "-")
	}
	if head == "" {
		head = "z"
	}
	return head + "-" + hex.EncodeToString(sum[:4])
}
