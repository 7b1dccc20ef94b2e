package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/policy"
)

// cmdPools is `swiftctl pools ls|gc`.
func cmdPools(args []string) error { return poolsCommand(os.Stdout, os.Stderr, args) }

// TenantUsage is one row of `pools ls --json`.
type TenantUsage struct {
	Tenant string         `json:"tenant"`
	Usage  ledger.Amounts `json:"usage"`
	Quota  ledger.Amounts `json:"quota"` // 0: no quota
}

// LeaseState is a lease with its container's liveness, for `pools ls --json`.
type LeaseState struct {
	ledger.Lease
	Alive bool `json:"alive"`
}

// PoolsListing is the output of `pools ls --json`.
type PoolsListing struct {
	Ledger  string        `json:"ledger"`
	Policy  string        `json:"policy"`
	Tenants []TenantUsage `json:"tenants"`
	Leases  []LeaseState  `json:"leases"`
}

func poolsCommand(stdout, stderr io.Writer, args []string) error {
	usage := fmt.Errorf("usage: swiftctl pools ls [--config FILE] [--leases] [--json] | swiftctl pools gc [--config FILE] [--dry-run] | "+
		"swiftctl pools repair [--config FILE] [--address SOCKET] [--state DIR] [--dry-run]: %w", errdefs.ErrInvalidArgument)
	if len(args) >= 1 && args[0] == "repair" {
		return poolsRepair(stdout, stderr, args[1:])
	}
	if len(args) < 1 || (args[0] != "ls" && args[0] != "gc") {
		return usage
	}
	fs := flag.NewFlagSet("pools "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", config.PathFromEnv(), "node config (its state_dir holds the ledger)")
	var asJSON, leases, dryRun *bool
	if args[0] == "ls" {
		asJSON = fs.Bool("json", false, "print JSON")
		leases = fs.Bool("leases", false, "list every lease too")
	} else {
		dryRun = fs.Bool("dry-run", false, "only list what would be reclaimed")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usage
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	l := ledger.New(cfg.StateDir)
	if args[0] == "gc" {
		dead, err := l.GC(*dryRun)
		if err != nil {
			return err
		}
		verb := "reclaimed"
		if *dryRun {
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
	all, err := l.List()
	if err != nil {
		return err
	}
	out := PoolsListing{Ledger: l.Path, Policy: cfg.PolicyFile(), Tenants: []TenantUsage{}, Leases: []LeaseState{}}
	quotas := map[string]ledger.Amounts{}
	if p, err := policy.LoadNode(cfg); err != nil {
		fmt.Fprintf(stderr, "swiftctl: warning: %v (quotas not shown)\n", err)
	} else {
		for n, t := range p.Tenants {
			quotas[n] = ledger.Amounts{Containers: t.Node.Containers, QPs: t.Node.QPs, HCAHandle: t.Node.HCAHandle,
				HCAObject: t.Node.HCAObject, Memlock: t.Node.Memlock}
		}
	}
	used := ledger.Usage(all)
	names := map[string]bool{}
	for n := range used {
		names[n] = true
	}
	for n := range quotas {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		out.Tenants = append(out.Tenants, TenantUsage{Tenant: n, Usage: used[n], Quota: quotas[n]})
	}
	for _, x := range all {
		out.Leases = append(out.Leases, LeaseState{Lease: x, Alive: ledger.Alive(x)})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "TENANT\t%s\n", strings.ToUpper(strings.Join(ledger.Resources, "\t")))
	for _, u := range out.Tenants {
		fmt.Fprint(tw, u.Tenant)
		for _, r := range ledger.Resources {
			cell := ledger.Format(r, u.Usage.Get(r))
			if q := u.Quota.Get(r); q > 0 {
				cell += "/" + ledger.Format(r, q)
			}
			fmt.Fprint(tw, "\t"+cell)
		}
		fmt.Fprintln(tw)
	}
	if len(out.Tenants) == 0 {
		fmt.Fprintf(tw, "(no leases in %s)\n", l.Path)
	}
	if *leases && len(out.Leases) > 0 {
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
