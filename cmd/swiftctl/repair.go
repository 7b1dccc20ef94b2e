package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/spf13/cobra"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/ledger"
)

// Defaults of `pools repair`: containerd's socket and state directory.
const (
	defaultContainerdAddress = "/run/containerd/containerd.sock"
	defaultContainerdState   = "/run/containerd"
)

func newRepairCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "repair",
		Short: "Rebuild a corrupt ledger from the containers containerd has",
		Long: `Rebuild the node's lease ledger from the containers that exist (containerd
says which): the leases it can still read, and the copies shims keep in the
bundles of running containers. It says what it kept and dropped, and keeps
the old file beside the new one. containerd's socket must answer first.`,
		Args: noArgs,
	}
	cfgPath := addConfigFlag(c, "its state_dir holds the ledger")
	address := c.Flags().String("address", defaultContainerdAddress, "containerd's socket")
	state := c.Flags().String("state", defaultContainerdState, "containerd's state directory (the bundles of running containers)")
	dryRun := c.Flags().Bool("dry-run", false, "say what would be kept and dropped, change nothing")
	out := addOutputFlag(c, false)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		// before anything else: without containerd there is nothing to rebuild from
		if err := checkSocket(*address, socketTimeout); err != nil {
			return err
		}
		return poolsRepair(cmd.OutOrStdout(), configPath(*cfgPath), *address, *state, *dryRun, *out)
	}
	return c
}

// socketTimeout bounds the dial that checks containerd's socket.
const socketTimeout = 2 * time.Second

// checkSocket fails at once, naming the path, unless address is a unix
// socket that accepts a connection within timeout.
func checkSocket(address string, timeout time.Duration) error {
	path := strings.TrimPrefix(address, "unix://")
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("containerd's socket %s does not exist (is containerd running? --address names its socket): %w", path, errdefs.ErrUnavailable)
	case err != nil:
		return fmt.Errorf("containerd's socket %s: %w: %w", path, err, errdefs.ErrUnavailable)
	case st.Mode().Type() != fs.ModeSocket:
		return fmt.Errorf("%s is not a socket (--address names containerd's socket, e.g. %s): %w", path, defaultContainerdAddress, errdefs.ErrInvalidArgument)
	}
	conn, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return fmt.Errorf("containerd's socket %s does not answer (is containerd running?): %w: %w", path, err, errdefs.ErrUnavailable)
	}
	return conn.Close()
}

// repairReport is `pools repair -o json`.
type repairReport struct {
	Ledger string `json:"ledger"`
	// Unreadable are the problems met: pages of the ledger, bundle copies.
	Unreadable []string `json:"unreadable"`
	// Kept are leases read from the ledger whose containers exist;
	// Recovered leases read from their bundles; Dropped leases whose
	// containers containerd does not have (namespace/ID each).
	Kept      []string `json:"kept"`
	Recovered []string `json:"recovered"`
	Dropped   []string `json:"dropped"`
	// Sound: nothing to repair. Rebuilt: the ledger was rebuilt, the old
	// file moved to Aside (null otherwise).
	Sound   bool    `json:"sound"`
	DryRun  bool    `json:"dry_run"`
	Rebuilt bool    `json:"rebuilt"`
	Aside   *string `json:"aside"`
	// Leases is the number of leases the ledger holds (or would hold).
	Leases int `json:"leases"`
}

// poolsRepair is `swiftctl pools repair`: it rebuilds the ledger from the
// containers that exist (containerd says which) — the leases it can still
// read, and the copies shims keep in the bundles of running containers —
// and says what it dropped. The old file is kept beside the new one.
func poolsRepair(stdout io.Writer, cfgPath, address, state string, dryRun bool, format outputFormat) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	l := ledger.New(cfg.StateDir)
	exist, err := containersOf(address)
	if err != nil {
		return err
	}
	aside := fmt.Sprintf("%s.broken-%d", l.Path, time.Now().Unix())
	r := repairReport{Ledger: l.Path, DryRun: dryRun, Unreadable: []string{}, Kept: []string{}, Recovered: []string{}, Dropped: []string{}}
	var lines []string // the text output, in order
	// under the ledger's lock from the salvage to the rebuild: no Create
	// takes a lease in between
	err = l.Repair(func(salvaged []ledger.Lease, problems []string) ([]ledger.Lease, bool, error) {
		bundled, bproblems := bundleLeases(state)
		problems = append(problems, bproblems...)
		kept := map[string]ledger.Lease{}
		var out []string
		for _, x := range salvaged {
			if exist[x.Key()] {
				kept[x.Key()] = x
				r.Kept = append(r.Kept, x.Key())
				out = append(out, fmt.Sprintf("kept %s (tenant %s)", x.Key(), x.Tenant))
			} else {
				r.Dropped = append(r.Dropped, x.Key())
				out = append(out, fmt.Sprintf("dropped %s (tenant %s): containerd has no such container", x.Key(), x.Tenant))
			}
		}
		for _, x := range bundled {
			if _, ok := kept[x.Key()]; ok || !exist[x.Key()] {
				continue
			}
			kept[x.Key()] = x
			r.Recovered = append(r.Recovered, x.Key())
			out = append(out, fmt.Sprintf("recovered %s (tenant %s) from its bundle", x.Key(), x.Tenant))
		}
		sort.Strings(out)
		for _, p := range problems {
			r.Unreadable = append(r.Unreadable, p)
			lines = append(lines, "unreadable: "+p)
		}
		lines = append(lines, out...)
		r.Leases = len(kept)
		if len(problems) == 0 && len(kept) == len(salvaged) {
			r.Sound = true
			lines = append(lines, fmt.Sprintf("%s is sound: %d lease(s), nothing to repair", l.Path, len(kept)))
			return nil, false, nil
		}
		if dryRun {
			lines = append(lines, fmt.Sprintf("would rebuild %s with %d lease(s)", l.Path, len(kept)))
			return nil, false, nil
		}
		leases := make([]ledger.Lease, 0, len(kept))
		for _, x := range kept {
			leases = append(leases, x)
		}
		return leases, true, nil
	}, aside)
	if err == nil {
		if _, serr := os.Stat(aside); serr == nil {
			r.Rebuilt, r.Aside = true, &aside
			lines = append(lines, fmt.Sprintf("rebuilt %s with %d lease(s); the old file is %s", l.Path, r.Leases, aside))
		}
		if format == outputJSON {
			sort.Strings(r.Kept)
			sort.Strings(r.Recovered)
			sort.Strings(r.Dropped)
			return writeJSON(stdout, r)
		}
	}
	if format == outputText {
		for _, s := range lines {
			fmt.Fprintln(stdout, s)
		}
	}
	return err
}

// containersOf returns namespace/ID of every container containerd has.
func containersOf(address string) (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := containerd.New(address, containerd.WithTimeout(10*time.Second))
	if err != nil {
		return nil, fmt.Errorf("ask containerd at %s which containers exist (--address): %w: %w", address, err, errdefs.ErrUnavailable)
	}
	defer c.Close()
	nss, err := c.NamespaceService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("containerd at %s: list namespaces: %w", address, err)
	}
	exist := map[string]bool{}
	for _, ns := range nss {
		cs, err := c.ContainerService().List(namespaces.WithNamespace(ctx, ns))
		if err != nil {
			return nil, fmt.Errorf("containerd at %s: list containers of namespace %s: %w", address, ns, err)
		}
		for _, x := range cs {
			exist[ns+"/"+x.ID] = true
		}
	}
	return exist, nil
}

// bundleLeases reads the lease copies in the bundles under containerd's
// state directory (io.containerd.runtime.v2.task/NS/ID/swift-lease.json).
func bundleLeases(state string) (leases []ledger.Lease, problems []string) {
	files, _ := filepath.Glob(filepath.Join(state, "io.containerd.runtime.v2.task", "*", "*", ledger.BundleFile))
	for _, f := range files {
		b, err := os.ReadFile(f)
		var x ledger.Lease
		if err == nil {
			err = json.Unmarshal(b, &x)
		}
		id, ns := filepath.Base(filepath.Dir(f)), filepath.Base(filepath.Dir(filepath.Dir(f)))
		if err == nil && (x.ID != id || x.Namespace != ns) {
			err = fmt.Errorf("names %s, not %s/%s", x.Key(), ns, id)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		leases = append(leases, x)
	}
	return leases, problems
}
