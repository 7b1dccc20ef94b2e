package shim

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/inject"
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

// TenantKey returns the path of tenant's key under the state dir, creating
// a random 32-byte key (mode 0400) the first time. Zygotes of one tenant
// authenticate each other with it.
func TenantKey(stateDir, tenant string) (string, error) {
	dir := filepath.Join(stateDir, "keys")
	path := filepath.Join(dir, tenant+".key")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("tenant key dir: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "."+tenant+".key-*")
	if err != nil {
		return "", fmt.Errorf("tenant key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o400); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	// Link, not rename: a concurrent shim that created the key first wins.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("tenant key: %w", err)
	}
	return path, nil
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
func prepareZygote(bundle, id string, cfg config.Config, opts annotations.Options, t *policy.Tenant, s *specs.Spec) (*inject.Zygote, []byte, error) {
	bin, err := zygoteBinDir(cfg)
	if err != nil {
		return nil, nil, err
	}
	pc := inject.NewPoolConfig(id, opts)
	pc.FunctionUIDBase = functionUIDs(s, cfg.Zygote.FunctionUIDBase)
	pc.Accept, pc.AcceptOnly = t.PeerNetworks()
	key, err := TenantKey(cfg.StateDir, pc.Tenant)
	if err != nil {
		return nil, nil, err
	}
	return &inject.Zygote{BinDir: bin, ConfPath: filepath.Join(bundle, PoolFile), KeyPath: key}, pc.Render(), nil
}
