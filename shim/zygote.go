package shim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/swift-rdma/swift-containerd/annotations"
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

// KeyCopyFile is the container's key FIFO in the bundle, through which
// the shim feeds its tenant's keyring to the zygote once.
const KeyCopyFile = "swift-tenant.keys"

// zygotePrep is what prepareZygote decided: the modifier, and the files
// to write once the spec edit has succeeded.
type zygotePrep struct {
	mod      *inject.Zygote
	poolConf []byte
	// keyCopy is the ring feedKey writes into the FIFO at mod.KeyPath
	// (mode 0600, owned by keyOwner on the host); nil once handed over
	keyCopy  []byte
	keyOwner [2]uint32
	// listen is the exchange address swift-init listens on (nil: it has
	// no peers and does not listen); its NetNS is filled in once the
	// spec's namespaces are final (listenNetNS).
	listen *ledger.Listen
}

// hostID maps a container uid or gid to the host through a user
// namespace's mappings (none: the same id); ok false when unmapped.
func hostID(maps []specs.LinuxIDMapping, id uint32) (uint32, bool) {
	if len(maps) == 0 {
		return id, true
	}
	for _, m := range maps {
		if uint64(id) >= uint64(m.ContainerID) && uint64(id) < uint64(m.ContainerID)+uint64(m.Size) {
			return m.HostID + (id - m.ContainerID), true
		}
	}
	return 0, false
}

// prepareZygote decides the zygote of a container. The zygote takes
// exchange connections only from the tenant's peer networks when t
// restricts peers. It gets the tenant's keyring through a FIFO of its
// own, owned by the container's user on the host, fed once (feedKey):
// nothing else in the container (its functions, which may run as that
// user; its workload; a second swift-init started through a symlink or a
// shell) reads the key after it. A non-root zygote also owns its socket
// directory.
func prepareZygote(bundle, id string, cfg config.Config, opts annotations.Options, t *policy.Tenant, qpLimit uint64, s *specs.Spec) (*zygotePrep, error) {
	bin, err := zygoteBinDir(cfg)
	if err != nil {
		return nil, err
	}
	pc := inject.NewPoolConfig(inject.DefaultName(id, s.Annotations), opts)
	pc.FunctionUIDBase = functionUIDs(s, cfg.Zygote.FunctionUIDBase)
	if err := sameUIDConfined(s, cfg.Zygote.FunctionUIDBase, pc.FunctionUIDBase); err != nil {
		return nil, err
	}
	pc.Accept, pc.AcceptOnly = t.PeerNetworks()
	pc.QPLimit = qpLimit
	key, _, err := TenantKeyring(cfg, t, pc.Tenant)
	if err != nil {
		return nil, err
	}
	p := &zygotePrep{mod: &inject.Zygote{BinDir: bin, ConfPath: filepath.Join(bundle, PoolFile), KeyPath: key}}
	var uid, gid uint32
	if s.Process != nil {
		uid, gid = s.Process.User.UID, s.Process.User.GID
	}
	var uidMaps, gidMaps []specs.LinuxIDMapping
	if s.Linux != nil {
		uidMaps, gidMaps = s.Linux.UIDMappings, s.Linux.GIDMappings
	}
	hu, uok := hostID(uidMaps, uid)
	hg, gok := hostID(gidMaps, gid)
	if !uok || !gok {
		return nil, fmt.Errorf("the container's user %d:%d is not mapped by its user namespace: the zygote could not read its key: %w",
			uid, gid, errdefs.ErrInvalidArgument)
	}
	ring, err := keys.ReadTrusted(key)
	if err != nil {
		return nil, fmt.Errorf("tenant %s's keyring: %w", pc.Tenant, err)
	}
	p.mod.KeyPath = filepath.Join(bundle, KeyCopyFile)
	p.keyCopy, p.keyOwner = ring.Format(), [2]uint32{hu, hg}
	if uid != 0 {
		p.mod.Owner = &[2]uint32{uid, gid}
	}
	p.poolConf = pc.Render()
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

// writeKeyCopy makes the container's key FIFO at mod.KeyPath, owned by
// its user on the host, readable by nobody else: a FIFO, so that nothing
// stays behind once swift-init has read the key and nothing the container
// writes there grows on the node's /run (feedKey writes the key into it).
func (p *zygotePrep) writeKeyCopy() error {
	if p.keyCopy == nil {
		return nil
	}
	path := p.mod.KeyPath
	if err := unix.Mkfifo(path, 0o600); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("make the container's key FIFO: %w", err)
	}
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	if err == nil && st.Mode&unix.S_IFMT != unix.S_IFIFO {
		err = fmt.Errorf("%s is not a FIFO", path)
	}
	if err == nil {
		err = unix.Lchown(path, int(p.keyOwner[0]), int(p.keyOwner[1]))
	}
	if err == nil {
		err = unix.Chmod(path, 0o600)
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("make the container's key FIFO: %w", err)
	}
	return nil
}

// feeders holds the key FIFOs this shim is feeding.
var feeders sync.Map

// feedKey writes the key into the container's FIFO once a reader (its
// swift-init) has opened it, then closes it: swift-init reads it to EOF.
// It tries with a growing pause (5 to 50 ms) and gives up when the FIFO
// is gone (the bundle was deleted). The key leaves its memory after.
func (p *zygotePrep) feedKey() {
	if p.keyCopy == nil {
		return
	}
	key, path := p.keyCopy, p.mod.KeyPath
	p.keyCopy = nil
	if _, busy := feeders.LoadOrStore(path, true); busy {
		clear(key) // a retried Create: one feeder per FIFO
		return
	}
	go func() {
		defer feeders.Delete(path)
		defer clear(key)
		pause := 5 * time.Millisecond
		for {
			fd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err == nil {
				_, _ = unix.Write(fd, key)
				unix.Close(fd)
				return
			}
			if err != unix.ENXIO && err != unix.EINTR {
				return // gone, or not ours to feed
			}
			time.Sleep(pause)
			pause = min(pause*2, 50*time.Millisecond)
		}
	}()
}
