package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/spf13/cobra"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/policy"
)

func newPolicyCmd() *cobra.Command {
	check := &cobra.Command{
		Use:   "check [POLICY]",
		Short: "Validate a tenant policy; problems with line numbers",
		Long: `Validate the tenant policy POLICY, else the one the node config names
(policy_path, or $SWIFT_POLICY), and print what it grants tenant by tenant
and which tenant the pods of each namespace belong to. Every problem is
printed with its line and key (on stderr; in "problems" with -o json).

A configured policy that is missing is a failed precondition (exit 4): no
RDMA container is created without it. policy_path = "" runs without one.`,
		Args: argsRange(0, 1),
	}
	cfgPath := addConfigFlag(check, "its policy_path, or $SWIFT_POLICY, names the policy")
	out := addOutputFlag(check, false)
	check.RunE = func(cmd *cobra.Command, args []string) error {
		return policyCheck(cmd.OutOrStdout(), cmd.ErrOrStderr(), configPath(*cfgPath), args, *out)
	}
	return newGroupCmd("policy", "Validate tenant policies", "", check)
}

// policyProblem is one problem of a malformed policy, in JSON.
type policyProblem struct {
	File string `json:"file"`
	// Line is 1-based, null when unknown.
	Line *int   `json:"line"`
	Key  string `json:"key,omitempty"`
	Msg  string `json:"message"`
}

// policyProblems is a malformed policy whose problems were printed (or go
// into the JSON error).
type policyProblems struct {
	err      error
	problems []policyProblem
}

func (e *policyProblems) Error() string { return e.err.Error() }
func (e *policyProblems) Unwrap() error { return e.err }

func policyCheck(stdout, stderr io.Writer, cfgPath string, args []string, out outputFormat) error {
	var path string
	if len(args) == 0 {
		cfg, err := config.Load(cfgPath)
		if err != nil {
			return err
		}
		path = cfg.PolicyFile()
		p, err := policy.LoadNode(cfg)
		if err == nil && p.IsOpen() {
			if out == outputJSON {
				return writeJSON(stdout, openPolicyReport(path))
			}
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
	} else {
		path = args[0]
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("tenant policy %s: %w", path, err)
		}
	}
	p, err := policy.Load(path)
	var pe *policy.Error
	if errors.As(err, &pe) {
		var ps []policyProblem
		for _, pr := range pe.Problems {
			jp := policyProblem{File: path, Key: pr.Key, Msg: pr.Msg}
			if pr.Line > 0 {
				jp.Line = &pr.Line
			}
			ps = append(ps, jp)
			if out == outputJSON {
				continue
			}
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
		return &policyProblems{fmt.Errorf("tenant policy %s: %d problem(s): %w", path, len(pe.Problems), errdefs.ErrInvalidArgument), ps}
	}
	if err != nil {
		return err
	}
	if out == outputJSON {
		return writeJSON(stdout, policyReportOf(p))
	}
	describePolicy(stdout, p)
	describeNamespaces(stdout, p)
	return nil
}

// policyReport is `policy check -o json`. Limits and quotas that a policy
// does not set (or sets to unlimited) are null.
type policyReport struct {
	// Path is the policy file, null for policy_path = "".
	Path *string `json:"path"`
	// Enforced is false when no policy file is in force (the open policy).
	Enforced bool `json:"enforced"`
	// LocalTenant is the tenant of local callers that name none; null
	// refuses them.
	LocalTenant *string        `json:"local_tenant"`
	Tenants     []tenantReport `json:"tenants"`
	// Namespaces: an example of every namespace and pattern the policy
	// names, with its tenant (null: refused) and what its pods may claim.
	Namespaces []namespaceReport `json:"namespaces"`
}

type tenantReport struct {
	Name          string   `json:"name"`
	Namespaces    []string `json:"namespaces"`
	ClaimableFrom []string `json:"claimable_from"`
	Local         bool     `json:"local"`
	// Devices is null for any of the node's devices.
	Devices []string `json:"devices"`
	// Peers is null for any peer.
	Peers       []string `json:"peers"`
	ForkSharing bool     `json:"fork_sharing"`
	Seccomp     string   `json:"seccomp"`
	// KeyFile is null when the node's keys_dir (or a node-local key) serves.
	KeyFile   *string `json:"key_file"`
	Container struct {
		QPs       *uint64 `json:"qps"`
		HCAHandle *uint64 `json:"hca_handle"`
		HCAObject *uint64 `json:"hca_object"`
		Memlock   *uint64 `json:"memlock"`
	} `json:"container"`
	Node struct {
		Containers *uint64 `json:"containers"`
		QPs        *uint64 `json:"qps"`
		HCAHandle  *uint64 `json:"hca_handle"`
		HCAObject  *uint64 `json:"hca_object"`
		Memlock    *uint64 `json:"memlock"`
	} `json:"node"`
}

type namespaceReport struct {
	Namespace string `json:"namespace"`
	// Pattern is the pattern the example stands for, null for an exact name.
	Pattern  *string  `json:"pattern"`
	Tenant   *string  `json:"tenant"`
	MayClaim []string `json:"may_claim"`
}

func strOrNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func openPolicyReport(path string) policyReport {
	return policyReport{Path: strOrNull(path), LocalTenant: strOrNull(policy.DefaultTenant),
		Tenants: []tenantReport{}, Namespaces: []namespaceReport{}}
}

func policyReportOf(p *policy.Policy) policyReport {
	r := policyReport{Path: strOrNull(p.Path), Enforced: true, LocalTenant: strOrNull(p.LocalTenant),
		Tenants: []tenantReport{}, Namespaces: []namespaceReport{}}
	for _, n := range p.TenantNames() {
		t := p.Tenants[n]
		tr := tenantReport{Name: n, Namespaces: orEmpty(t.Namespaces), ClaimableFrom: orEmpty(t.ClaimableFrom), Local: t.Local,
			Devices: t.Devices, ForkSharing: t.ForkSharing, Seccomp: t.Seccomp, KeyFile: strOrNull(t.KeyFile)}
		if t.Peers != nil {
			tr.Peers = []string{}
			for _, pr := range t.Peers {
				tr.Peers = append(tr.Peers, pr.Text)
			}
		}
		c, q := t.Container, t.Node
		tr.Container.QPs, tr.Container.HCAHandle = limitOrNull(c.QPs), limitOrNull(uint64(c.HCAHandle))
		tr.Container.HCAObject, tr.Container.Memlock = limitOrNull(uint64(c.HCAObject)), limitOrNull(c.Memlock)
		tr.Node.Containers, tr.Node.QPs = limitOrNull(q.Containers), limitOrNull(q.QPs)
		tr.Node.HCAHandle, tr.Node.HCAObject, tr.Node.Memlock = limitOrNull(q.HCAHandle), limitOrNull(q.HCAObject), limitOrNull(q.Memlock)
		r.Tenants = append(r.Tenants, tr)
	}
	for _, e := range namespaceExamples(p) {
		nr := namespaceReport{Namespace: e.ns, MayClaim: orEmpty(p.ClaimersOf(e.ns))}
		if e.from != "" && e.from != "no pattern" {
			nr.Pattern = strOrNull(e.from)
		}
		if h := p.HomeOf(e.ns); h != nil {
			nr.Tenant = strOrNull(h.Name)
		}
		r.Namespaces = append(r.Namespaces, nr)
	}
	return r
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// nsExample is an example namespace and the pattern it stands for ("" for
// an exact name, "no pattern" for one no pattern matches).
type nsExample struct{ ns, from string }

// namespaceExamples returns one example of every namespace and pattern
// the policy names, and one that none names, sorted.
func namespaceExamples(p *policy.Policy) []nsExample {
	var exs []nsExample
	seen := map[string]bool{}
	add := func(ns, from string) {
		if !seen[ns] {
			seen[ns] = true
			exs = append(exs, nsExample{ns, from})
		}
	}
	for _, n := range p.TenantNames() {
		t := p.Tenants[n]
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
	return exs
}

// describeNamespaces prints, for one example of every namespace and
// pattern the policy names, the tenant a pod there belongs to and the
// tenants it may claim besides (the rule of Policy.Resolve).
func describeNamespaces(w io.Writer, p *policy.Policy) {
	fmt.Fprintln(w, "pods by namespace (a namespace belongs to one tenant: an exact name beats a pattern, a longer prefix a shorter one;")
	fmt.Fprintln(w, "swift.io/tenant may name only that tenant or one whose claimable_from matches):")
	for _, e := range namespaceExamples(p) {
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
	names := p.TenantNames()
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
