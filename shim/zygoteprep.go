package shim

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/inject"
	"github.com/swift-rdma/swift-containerd/internal/trust"
	"github.com/swift-rdma/swift-containerd/keys"
	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/policy"
)

// PoolFile is the pool description's name inside the bundle.
const PoolFile = "swift-pool.conf"

// zygoteBinDir is where swift-init and swift-run are on this node. The
// directory is mounted into every zygote container, whose PID 1 is its
// swift-init: only root may have written it, swift-init and swift-run, or
// the directories on the way to them (trust.CheckDir, trust.Check).
func zygoteBinDir(cfg config.Config) (string, error) {
	dir := cfg.Zygote.BinDir
	for _, f := range []string{"swift-init", "swift-run"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("swift.io/zygote=true needs %s in %s (zygote.bin_dir): %w",
				f, dir, errdefs.ErrFailedPrecondition)
		}
	}
	const must = "it must be owned by root and writable by no one else, nor may the directories on the way to it be"
	if _, err := trust.CheckDir(dir); err != nil {
		return "", fmt.Errorf("zygote.bin_dir: %s is mounted into every zygote container (its swift-init as PID 1): %s: %w", dir, must, err)
	}
	for _, f := range []string{"swift-init", "swift-run"} {
		p := filepath.Join(dir, f)
		if _, err := trust.Check(p); err != nil {
			return "", fmt.Errorf("zygote.bin_dir: %s runs in every zygote container (swift-init as its PID 1): %s: %w", p, must, err)
		}
	}
	return dir, nil
}

// TenantKeyring returns the path of the tenant's keyring, checked (a ring
// of good keys only its owner may read, root's in root's directories:
// keys.ReadTrusted): the provisioned one (the policy's key_file, else
// keys_dir/<tenant>.keys), else a node-local ring under the state dir,
// created the first time (its zygotes reach no other node). provisioned
// tells which.
func TenantKeyring(cfg config.Config, t *policy.Tenant, tenant string) (path string, provisioned bool, err error) {
	keyFile := ""
	if t != nil {
		keyFile = t.KeyFile
	}
	if path, found, err := keys.Provisioned(cfg.KeysDir, keyFile, tenant); err != nil || found {
		return path, found, err
	}
	dir := filepath.Join(cfg.StateDir, "keys")
	if t == nil || t.Unlimited {
		// no policy: tenant names are whatever containers claim; bound
		// the node-local rings they make
		if err := boundOpenRings(dir, tenant); err != nil {
			return "", false, err
		}
	}
	local, err := keys.LocalRing(dir, tenant)
	if err != nil {
		return "", false, fmt.Errorf("node-local key of tenant %s: %w", tenant, err)
	}
	return local, false, nil
}

// MaxOpenTenantKeys bounds the node-local keyrings made without a tenant
// policy, where any claimed name is a tenant.
const MaxOpenTenantKeys = 64

// boundOpenRings refuses a new node-local ring once MaxOpenTenantKeys
// exist (ResourceExhausted); an existing one is always used.
func boundOpenRings(dir, tenant string) error {
	if _, err := os.Lstat(filepath.Join(dir, tenant+".keys")); err == nil {
		return nil
	}
	rings, _ := filepath.Glob(filepath.Join(dir, "*.keys"))
	if len(rings) >= MaxOpenTenantKeys {
		return fmt.Errorf("no tenant policy: %d tenants already have a node-local key in %s, the most without a policy; "+
			"write a tenant policy, or remove the rings of tenants no longer used: %w", len(rings), dir, errdefs.ErrResourceExhausted)
	}
	return nil
}

// functionUIDs is the uid base functions run under: the node's, unless the
// container has a user namespace that does not map all of its uids (then
// functions run as the container's user: swift-init could not switch).
func functionUIDs(s *specs.Spec, base uint32) uint32 {
	if base == 0 || s.Linux == nil || len(s.Linux.UIDMappings) == 0 {
		return base
	}
	mapped := func(ms []specs.LinuxIDMapping) bool {
		for _, m := range ms {
			if uint64(base) >= uint64(m.ContainerID) &&
				uint64(base)+config.FunctionUIDs <= uint64(m.ContainerID)+uint64(m.Size) {
				return true
			}
		}
		return false
	}
	if mapped(s.Linux.UIDMappings) && mapped(s.Linux.GIDMappings) {
		return base
	}
	return 0
}

// landlockABI is the kernel's Landlock ABI version, or -1 without it.
var landlockABI = func() int {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */)
	if errno != 0 {
		return -1
	}
	return int(v)
}

// sameUIDConfined refuses a zygote whose functions would run under its own
// uid (no function uids: the node's base cfgBase is 0, the container's
// user namespace does not map them so base is 0, or the zygote is not
// root) on a kernel without Landlock: only
// Landlock keeps such a function from replacing the control socket and
// from the entrypoint's memory (swift-init confines each one with it).
func sameUIDConfined(s *specs.Spec, cfgBase, base uint32) error {
	why := ""
	switch {
	case cfgBase == 0:
		why = "zygote.function_uid_base is 0"
	case base == 0:
		why = "its user namespace does not map the function uids"
	case s.Process != nil && s.Process.User.UID != 0:
		why = fmt.Sprintf("the zygote runs as uid %d, not root, and cannot switch uids", s.Process.User.UID)
	default:
		return nil
	}
	if v := landlockABI(); v < 1 {
		return fmt.Errorf("swift.io/zygote=true: functions would run under the zygote's own uid (%s), and only Landlock keeps them "+
			"from its control socket and the entrypoint's memory, which this kernel does not have (Linux 5.13 or later with "+
			"landlock in its lsm= list): %w", why, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// zygotePrep is what prepareZygote decided: the modifier, the files to
// write once the spec edit has succeeded, and the key to hand over once
// runc made the container's init.
type zygotePrep struct {
	mod *inject.Zygote
	// pool is the pool description, written once the lease is taken
	// (which may give the functions a uid range of their own)
	pool inject.PoolConfig
	// ownUIDs: its functions run under host uids of their own (function
	// uids, no user namespace), which a policy's ledger ranges keep apart
	// from other containers'
	ownUIDs bool
	key     *keyHandoff
	// listen is the exchange address swift-init listens on (nil: it has
	// no peers and does not listen); its NetNS is filled in once the
	// spec's namespaces are final (listenNetNS).
	listen *ledger.Listen
}

// ownPIDNamespace refuses a zygote container that shares a PID namespace
// (the host's: a hostPID pod or --pid host; another's: a pod that shares
// its process namespace): swift-init is PID 1 of a namespace of its own,
// where nothing of its uid runs before it, so that none can open its
// memory in the instant between its exec and its making itself
// undumpable, or signal it as a sibling.
func ownPIDNamespace(s *specs.Spec) error {
	if s.Linux != nil {
		for _, ns := range s.Linux.Namespaces {
			if ns.Type != specs.PIDNamespace {
				continue
			}
			if ns.Path != "" {
				return fmt.Errorf("swift.io/zygote=true: the container joins the PID namespace %s (a pod that shares its process namespace?); "+
					"the zygote is PID 1 of a PID namespace of its own: %w", ns.Path, errdefs.ErrInvalidArgument)
			}
			return nil
		}
	}
	return fmt.Errorf("swift.io/zygote=true: the container shares the host's PID namespace (hostPID); "+
		"the zygote is PID 1 of a PID namespace of its own: %w", errdefs.ErrInvalidArgument)
}

// prepareZygote decides the zygote of a container. The zygote takes
// exchange connections only from the tenant's peer networks when t
// restricts peers. It gets the pair keys of its name and its peers' names
// (keys.PairRing), never the tenant key, from the shim by hand
// (keyHandoff), never through a path: nothing else in the container (its
// functions, which may run as its user; its workload; an exec; a second
// swift-init started through a symlink or a shell) can read the key. A
// non-root zygote owns its socket directory. A pod's zygote and the peers
// it names live in the pod's namespace (PoolConfig.InNamespace).
func prepareZygote(req *createRequest, ten *tenancy) (*zygotePrep, error) {
	bundle, cfg, s := req.bundle, req.cfg, req.spec
	bin, err := zygoteBinDir(cfg)
	if err != nil {
		return nil, err
	}
	if err := ownPIDNamespace(s); err != nil {
		return nil, err
	}
	t := ten.tenant
	pc := inject.NewPoolConfig(inject.DefaultName(filepath.Base(bundle), s.Annotations), ten.opts)
	if ten.caller.CRI {
		if pc, err = pc.InNamespace(ten.caller.Namespace); err != nil {
			return nil, err
		}
	}
	pc.FunctionUIDBase = functionUIDs(s, cfg.Zygote.FunctionUIDBase)
	if err := sameUIDConfined(s, cfg.Zygote.FunctionUIDBase, pc.FunctionUIDBase); err != nil {
		return nil, err
	}
	pc.Accept, pc.AcceptOnly = t.PeerNetworks()
	rules, dialOnly := t.DialRules()
	pc.DialOnly = dialOnly
	for _, r := range rules {
		pc.Dial = append(pc.Dial, inject.DialRule{Prefix: r.Prefix, MinPort: r.MinPort, MaxPort: r.MaxPort})
	}
	pc.QPLimit = ten.qpLimit
	key, _, err := TenantKeyring(cfg, t, pc.Tenant)
	if err != nil {
		return nil, err
	}
	ring, err := keys.ReadTrusted(key)
	if err != nil {
		return nil, fmt.Errorf("tenant %s's keyring: %w", pc.Tenant, err)
	}
	initPath := filepath.Join(bin, "swift-init")
	var ist unix.Stat_t
	if err := unix.Stat(initPath, &ist); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", initPath, err, errdefs.ErrFailedPrecondition)
	}
	// the zygote gets the pair keys of its name and its peers', never the
	// tenant key: it can speak for no other name
	peers := make([]string, len(pc.Peers))
	for i, pr := range pc.Peers {
		peers[i] = pr.Name
	}
	p := &zygotePrep{mod: &inject.Zygote{BinDir: bin, ConfPath: filepath.Join(bundle, PoolFile)},
		key: &keyHandoff{ring: ring.PairRing(pc.Tenant, pc.Name, peers), initDev: ist.Dev, initIno: ist.Ino, initPath: initPath}}
	if s.Process != nil && s.Process.User.UID != 0 {
		p.mod.Owner = &[2]uint32{s.Process.User.UID, s.Process.User.GID}
	}
	p.pool = pc
	p.ownUIDs = pc.FunctionUIDBase != 0 && (s.Linux == nil || len(s.Linux.UIDMappings) == 0)
	if len(pc.Peers) > 0 {
		p.listen = &ledger.Listen{Host: pc.ListenHost, Port: pc.ListenPort}
	}
	return p, nil
}

// listenNetNS names the network namespace the container of s listens in,
// as ledger.Listen.NetNS, "netns:DEV:INO": the one it joins by path (its
// pod's), else the shim's, the node's (a host-network container); "" for
// a new namespace of its own, where no other container listens.
func listenNetNS(s *specs.Spec) (string, error) {
	path := "/proc/self/ns/net"
	if s.Linux != nil {
		for _, ns := range s.Linux.Namespaces {
			if ns.Type == specs.NetworkNamespace {
				if ns.Path == "" {
					return "", nil
				}
				path = ns.Path
			}
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", fmt.Errorf("the container's network namespace %s: %w: %w", path, err, errdefs.ErrInvalidArgument)
	}
	return fmt.Sprintf("netns:%d:%d", st.Dev, st.Ino), nil
}
