package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/policy"
)

func newPoolsCmd() *cobra.Command {
	ls := &cobra.Command{
		Use:   "ls",
		Short: "RDMA leases in the node's ledger: usage and quota per tenant",
		Long: `Show the RDMA leases in the node's ledger (state_dir): usage and the
tenant policy's node quota per tenant (USED/QUOTA), and with --leases every
lease with its container's liveness. With -o json, a quota the policy
does not set is null.`,
		Args: noArgs,
	}
	lsConfig := addConfigFlag(ls, "its state_dir holds the ledger")
	leases := ls.Flags().Bool("leases", false, "list every lease too")
	lsOut := addOutputFlag(ls, true)
	ls.RunE = func(cmd *cobra.Command, _ []string) error {
		return poolsList(cmd.OutOrStdout(), cmd.ErrOrStderr(), configPath(*lsConfig), *leases, *lsOut)
	}

	gc := &cobra.Command{
		Use:   "gc",
		Short: "Reclaim the leases of containers that no longer exist",
		Long: `Reclaim the leases whose containers no longer exist (their shim is gone):
what a crashed shim or a reboot left behind. Every opted-in Create under
the policy does the same for the tenant it charges.`,
		Args: noArgs,
	}
	gcConfig := addConfigFlag(gc, "its state_dir holds the ledger")
	dryRun := gc.Flags().Bool("dry-run", false, "only list what would be reclaimed")
	gcOut := addOutputFlag(gc, false)
	gc.RunE = func(cmd *cobra.Command, _ []string) error {
		return poolsGC(cmd.OutOrStdout(), configPath(*gcConfig), *dryRun, *gcOut)
	}
	return newGroupCmd("pools", "The node's RDMA lease ledger: usage, quotas, reclaim, repair", "", ls, gc, newRepairCmd())
}

// TenantUsage is one row of `pools ls -o json`.
type TenantUsage struct {
	Tenant string         `json:"tenant"`
	Usage  ledger.Amounts `json:"usage"`
	Quota  Quota          `json:"quota"`
}

// Quota is a tenant's node quota in `pools ls -o json`: null where the
// policy sets none.
type Quota struct {
	Containers *uint64 `json:"containers"`
	QPs        *uint64 `json:"qps"`
	HCAHandle  *uint64 `json:"hca_handle"`
	HCAObject  *uint64 `json:"hca_object"`
	Memlock    *uint64 `json:"memlock"`
}

func quotaOf(a ledger.Amounts) Quota {
	return Quota{Containers: limitOrNull(a.Containers), QPs: limitOrNull(a.QPs), HCAHandle: limitOrNull(a.HCAHandle),
		HCAObject: limitOrNull(a.HCAObject), Memlock: limitOrNull(a.Memlock)}
}

// LeaseState is a lease with its container's liveness, for `pools ls -o json`.
type LeaseState struct {
	ledger.Lease
	Alive bool `json:"alive"`
}

// PoolsListing is the output of `pools ls -o json`.
type PoolsListing struct {
	Ledger  string        `json:"ledger"`
	Policy  string        `json:"policy"`
	Tenants []TenantUsage `json:"tenants"`
	Leases  []LeaseState  `json:"leases"`
}

// gcReport is `pools gc -o json`.
type gcReport struct {
	Ledger    string         `json:"ledger"`
	DryRun    bool           `json:"dry_run"`
	Reclaimed []ledger.Lease `json:"reclaimed"`
}

func poolsGC(stdout io.Writer, cfgPath string, dryRun bool, out outputFormat) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	l := ledger.New(cfg.StateDir)
	dead, err := l.GC(dryRun)
	if err != nil {
		return err
	}
	if out == outputJSON {
		r := gcReport{Ledger: l.Path, DryRun: dryRun, Reclaimed: []ledger.Lease{}}
		r.Reclaimed = append(r.Reclaimed, dead...)
		return writeJSON(stdout, r)
	}
	verb := "reclaimed"
	if dryRun {
		verb = "would reclaim"
	}
	for _, d := range dead {
		fmt.Fprintf(stdout, "%s %s (tenant %s, shim pid %d, bundle %s)\n", verb, d.Key(), d.Tenant, d.Owner.PID, d.Bundle)
	}
	if len(dead) == 0 {
		fmt.Fprintf(stdout, "nothing to reclaim in %s\n", l.Path)
	}
	return nil
}

func poolsList(stdout, stderr io.Writer, cfgPath string, leases bool, format outputFormat) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	l := ledger.New(cfg.StateDir)
	all, err := l.List()
	if err != nil {
		return err
	}
	out := PoolsListing{Ledger: l.Path, Policy: cfg.PolicyFile(), Tenants: []TenantUsage{}, Leases: []LeaseState{}}
	quotas := map[string]ledger.Amounts{}
	if p, err := policy.LoadNode(cfg); err != nil {
		fmt.Fprintf(stderr, "swiftctl: warning: %v (quotas not shown)\n", err)
	} else {
		quotas = p.NodeQuotas()
	}
	used := ledger.Usage(all)
	for _, n := range ledger.Tenants(used, quotas) {
		out.Tenants = append(out.Tenants, TenantUsage{Tenant: n, Usage: used[n], Quota: quotaOf(quotas[n])})
	}
	for _, x := range all {
		out.Leases = append(out.Leases, LeaseState{Lease: x, Alive: ledger.Alive(x)})
	}
	if format == outputJSON {
		return writeJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "TENANT\t%s\n", strings.ToUpper(strings.Join(ledger.Resources, "\t")))
	for _, u := range out.Tenants {
		fmt.Fprint(tw, u.Tenant)
		for _, r := range ledger.Resources {
			cell := ledger.Format(r, u.Usage.Get(r))
			if q := quotas[u.Tenant].Get(r); q > 0 {
				cell += "/" + ledger.Format(r, q)
			}
			fmt.Fprint(tw, "\t"+cell)
		}
		fmt.Fprintln(tw)
	}
	if len(out.Tenants) == 0 {
		fmt.Fprintf(tw, "(no leases in %s)\n", l.Path)
	}
	if leases && len(out.Leases) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "LEASE\tTENANT\tDEVICES\tQPS\tHCA_HANDLE\tHCA_OBJECT\tMEMLOCK\tSHIM_PID\tSTATE\tAGE")
		for _, x := range out.Leases {
			state := "live"
			if !x.Alive {
				state = "gone (pools gc reclaims it)"
			}
			c := x.Charge
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", x.Key(), x.Tenant, strings.Join(x.Devices, ","),
				c.QPs, c.HCAHandle, c.HCAObject, ledger.Format("memlock", c.Memlock), x.Owner.PID, state,
				time.Since(x.Created).Round(time.Second))
		}
	}
	return tw.Flush()
}
