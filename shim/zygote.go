package shim

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/inject"
	"github.com/swift-rdma/swift-containerd/keys"
	"github.com/swift-rdma/swift-containerd/policy"
)

// PoolFile is the pool description's name inside the bundle.
const PoolFile = "swift-pool.conf"

// zygoteBinDir is where swift-init and swift-run are on this node.
func zygoteBinDir(cfg config.Config) (string, error) {
	dir := cfg.Zygote.BinDir
	for _, f := range []string{"swift-init", "swift-run"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("swift.io/zygote=true needs %s in %s (zygote.bin_dir): %w",
				f, dir, errdefs.ErrFailedPrecondition)
		}
	}
	return dir, nil
}

// TenantKeyring returns the path of the tenant's keyring, checked: the
// provisioned one (the policy's key_file, else keys_dir/<tenant>.keys),
// else a node-local ring under the state dir, created the first time (its
// zygotes reach no other node). provisioned tells which.
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

// prepareZygote returns the zygote modifier and the pool description to
// write at its ConfPath (in the bundle) once the spec edit has succeeded.
// The zygote takes exchange connections only from the tenant's peer
// networks when t restricts peers.
func prepareZygote(bundle, id string, cfg config.Config, opts annotations.Options, t *policy.Tenant, qpLimit uint64, s *specs.Spec) (*inject.Zygote, []byte, error) {
	bin, err := zygoteBinDir(cfg)
	if err != nil {
		return nil, nil, err
	}
	pc := inject.NewPoolConfig(inject.DefaultName(id, s.Annotations), opts)
	pc.FunctionUIDBase = functionUIDs(s, cfg.Zygote.FunctionUIDBase)
	pc.Accept, pc.AcceptOnly = t.PeerNetworks()
	pc.QPLimit = qpLimit
	key, _, err := TenantKeyring(cfg, t, pc.Tenant)
	if err != nil {
		return nil, nil, err
	}
	return &inject.Zygote{BinDir: bin, ConfPath: filepath.Join(bundle, PoolFile), KeyPath: key}, pc.Render(), nil
}
