package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/policy"
)

// cmdPolicy is `swiftctl policy check [FILE]`.
func cmdPolicy(args []string) error { return policyCommand(os.Stdout, os.Stderr, args) }

func policyCommand(stdout, stderr io.Writer, args []string) error {
	if len(args) < 1 || args[0] != "check" {
		return fmt.Errorf("usage: swiftctl policy check [--config FILE] [POLICY]: %w", errdefs.ErrInvalidArgument)
	}
	fs := flag.NewFlagSet("policy check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", config.PathFromEnv(), "node config (its policy_path, or $SWIFT_POLICY, names the policy)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var path string
	switch fs.NArg() {
	case 0:
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		path = cfg.PolicyFile()
		p, err := policy.LoadNode(cfg)
		if err == nil && p.IsOpen() {
			what := "policy_path = \"\""
			if path != "" {
				what = path + " is not present"
			}
			fmt.Fprintf(stdout, "%s: no tenant policy is enforced: every container gets the open tenant %q or the one it names\n",
				what, policy.DefaultTenant)
			return nil
		}
		if err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) {
			return err // a configured policy that is missing
		}
	case 1:
		path = fs.Arg(0)
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("tenant policy %s: %w", path, err)
		}
	default:
		return fmt.Errorf("usage: swiftctl policy check [--config FILE] [POLICY]: %w", errdefs.ErrInvalidArgument)
	}
	p, err := policy.Load(path)
	var pe *policy.Error
	if errors.As(err, &pe) {
		for _, pr := range pe.Problems {
			loc := path
			if pr.Line > 0 {
				loc = fmt.Sprintf("%s:%d", path, pr.Line)
			}
			if pr.Key != "" {
				fmt.Fprintf(stderr, "%s: %s: %s\n", loc, pr.Key, pr.Msg)
			} else {
				fmt.Fprintf(stderr, "%s: %s\n", loc, pr.Msg)
			}
		}
		return fmt.Errorf("tenant policy %s: %d problem(s): %w", path, len(pe.Problems), errdefs.ErrInvalidArgument)
	}
	if err != nil {
		return err
	}
	describePolicy(stdout, p)
	describeNamespaces(stdout, p)
	return nil
}

// describeNamespaces prints, for one example of every namespace and
// pattern the policy names, the tenant a pod there belongs to and the
// tenants it may claim besides (the rule of Policy.Resolve).
func describeNamespaces(w io.Writer, p *policy.Policy) {
	type ex struct{ ns, from string }
	var exs []ex
	seen := map[string]bool{}
	add := func(ns, from string) {
		if !seen[ns] {
			seen[ns] = true
			exs = append(exs, ex{ns, from})
		}
	}
	for _, t := range p.Tenants {
		for _, pat := range append(append([]string{}, t.Namespaces...), t.ClaimableFrom...) {
			if pat == "*" {
				add("other-example", "*")
			} else if pre, ok := strings.CutSuffix(pat, "*"); ok {
				add(pre+"example", pat)
			} else {
				add(pat, "")
			}
		}
	}
	add("other-example", "no pattern")
	sort.Slice(exs, func(i, j int) bool { return exs[i].ns < exs[j].ns })
	fmt.Fprintln(w, "pods by namespace (a namespace belongs to one tenant: an exact name beats a pattern, a longer prefix a shorter one;")
	fmt.Fprintln(w, "swift.io/tenant may name only that tenant or one whose claimable_from matches):")
	for _, e := range exs {
		ns := e.ns
		if e.from != "" {
			ns += " (" + e.from + ")"
		}
		home := "refused (no tenant)"
		if h := p.HomeOf(e.ns); h != nil {
			home = "tenant " + h.Name
		}
		fmt.Fprintf(w, "  %-32s %s; may claim: %s\n", ns, home, orNone(p.ClaimersOf(e.ns)))
	}
}

// describePolicy prints what a valid policy grants, tenant by tenant.
func describePolicy(w io.Writer, p *policy.Policy) {
	names := make([]string, 0, len(p.Tenants))
	for n := range p.Tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "%s: ok, %d tenant(s)\n", p.Path, len(names))
	lt := "refused (they must name a tenant with swift.io/tenant)"
	if p.LocalTenant != "" {
		lt = p.LocalTenant
	}
	fmt.Fprintf(w, "local callers without swift.io/tenant: %s\n", lt)
	for _, n := range names {
		t := p.Tenants[n]
		fmt.Fprintf(w, "tenant %s\n", n)
		fmt.Fprintf(w, "  namespaces:      %s\n", orNone(t.Namespaces))
		fmt.Fprintf(w, "  claimable from:  %s\n", orNone(t.ClaimableFrom))
		fmt.Fprintf(w, "  local claims:    %v\n", t.Local)
		devices := "any of the node's"
		if t.Devices != nil {
			devices = orNone(t.Devices)
		}
		fmt.Fprintf(w, "  devices:         %s\n", devices)
		peers := "any"
		if t.Peers != nil {
			var s []string
			for _, r := range t.Peers {
				s = append(s, r.Text)
			}
			peers = orNone(s)
		}
		fmt.Fprintf(w, "  peers:           %s\n", peers)
		fmt.Fprintf(w, "  fork sharing:    %v\n", t.ForkSharing)
		fmt.Fprintf(w, "  seccomp:         %s\n", t.Seccomp)
		c := t.Container
		fmt.Fprintf(w, "  per container:   qps %s, hca_handle %s, hca_object %s, memlock %s\n",
			limit("qps", c.QPs), limit("qps", uint64(c.HCAHandle)), limit("qps", uint64(c.HCAObject)), limit("memlock", c.Memlock))
		q := t.Node
		fmt.Fprintf(w, "  node quota:      containers %s, qps %s, hca_handle %s, hca_object %s, memlock %s\n",
			limit("qps", q.Containers), limit("qps", q.QPs), limit("qps", q.HCAHandle), limit("qps", q.HCAObject), limit("memlock", q.Memlock))
	}
}

func limit(res string, n uint64) string {
	if n == 0 {
		return "-"
	}
	return ledger.Format(res, n)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
