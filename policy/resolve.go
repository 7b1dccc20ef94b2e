package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/annotations"
)

// CRISandboxNamespace is the annotation containerd's CRI plugin puts on
// every container of a pod: the pod's Kubernetes namespace. A pod cannot
// set it (CRI passes only the annotations its runtime entry lists in
// pod_annotations / container_annotations, and sets this one itself), but
// any containerd client can: it counts only in the CRI's namespace.
const CRISandboxNamespace = "io.kubernetes.cri.sandbox-namespace"

// Caller is who asks for a container: a CRI pod of a Kubernetes namespace,
// or a local caller (ctr, nerdctl, any containerd client run by root).
type Caller struct {
	CRI       bool
	Namespace string // the pod's namespace when CRI
	// Containerd is the containerd namespace of a local caller that set
	// the CRI annotation outside the CRI's namespace ("" otherwise).
	Containerd string
}

func (c Caller) String() string {
	if c.CRI {
		return fmt.Sprintf("pod namespace %q", c.Namespace)
	}
	if c.Containerd != "" {
		return fmt.Sprintf("local caller (containerd namespace %q is not the CRI's: its %s annotation does not count)",
			c.Containerd, CRISandboxNamespace)
	}
	return "local caller (no " + CRISandboxNamespace + " annotation)"
}

// CallerOf tells who asks from a container's containerd namespace and its
// annotations: a pod only in criNamespace (the CRI plugin's, config
// cri_namespace) and with the CRI's sandbox-namespace annotation; any
// other container is a local caller, whatever annotations it sets.
func CallerOf(containerdNS, criNamespace string, ann map[string]string) Caller {
	ns, ok := ann[CRISandboxNamespace]
	if !ok {
		return Caller{}
	}
	if containerdNS != criNamespace {
		return Caller{Containerd: containerdNS}
	}
	return Caller{CRI: true, Namespace: ns}
}

// Resolve returns the tenant of a container from its caller and its
// swift.io/tenant annotation (claim, "" when absent). Under CRI the pod's
// namespace belongs to exactly one tenant, its home: the tenant with the
// namespace's best match in namespaces (HomeOf). A claim is honoured for
// the home tenant, or for a tenant whose claimable_from matches the
// namespace; a tenant whose namespaces match only through a pattern that
// is not the best match cannot be claimed (an exact name is never
// overridden by "*"). A local caller gets local_tenant, or the tenant it
// claims if that tenant sets local = true. Refusals are PermissionDenied
// errors naming the caller and swift.io/tenant.
func (p *Policy) Resolve(c Caller, claim string) (*Tenant, error) {
	if p.open {
		name := claim
		if name == "" {
			name = DefaultTenant
		}
		return &Tenant{Name: name, Local: true, ForkSharing: true, Seccomp: SeccompNone, Unlimited: true}, nil
	}
	if c.CRI {
		home := p.HomeOf(c.Namespace)
		if claim == "" {
			if home == nil {
				return nil, fmt.Errorf("%s is not mapped to any tenant in %s (add it to a tenant's namespaces): %w",
					c, p.Path, errdefs.ErrPermissionDenied)
			}
			return home, nil
		}
		t, err := p.claimed(c, claim)
		if err != nil {
			return nil, err
		}
		if t == home || matchAny(t.ClaimableFrom, c.Namespace) {
			return t, nil
		}
		belongs := "is not mapped to any tenant"
		if home != nil {
			belongs = fmt.Sprintf("belongs to tenant %q", home.Name)
		}
		return nil, fmt.Errorf("annotation %s=%q: %s %s and may not claim tenant %q (list the namespace in %s in %s): %w",
			annotations.Tenant, claim, c, belongs, claim, t.Key("claimable_from"), p.Path, errdefs.ErrPermissionDenied)
	}
	if claim == "" {
		if p.LocalTenant == "" {
			return nil, fmt.Errorf("a %s must name its tenant with %s (or set local_tenant in %s): %w",
				c, annotations.Tenant, p.Path, errdefs.ErrPermissionDenied)
		}
		return p.Tenants[p.LocalTenant], nil
	}
	t, err := p.claimed(c, claim)
	if err != nil {
		return nil, err
	}
	if !t.Local && claim != p.LocalTenant {
		return nil, fmt.Errorf("annotation %s=%q: a %s may not claim tenant %q (set %s = true in %s): %w",
			annotations.Tenant, claim, c, claim, t.Key("local"), p.Path, errdefs.ErrPermissionDenied)
	}
	return t, nil
}

// HomeOf returns the tenant a Kubernetes namespace belongs to (nil: none):
// the one whose namespaces hold the namespace exactly, else the one with
// the longest matching "prefix*" pattern ("*" last).
func (p *Policy) HomeOf(ns string) *Tenant {
	return p.tenantOf(ns, func(t *Tenant) []string { return t.Namespaces })
}

// ClaimersOf returns, sorted, the tenants a pod of namespace ns may claim
// with swift.io/tenant besides its home tenant: those whose claimable_from
// matches ns.
func (p *Policy) ClaimersOf(ns string) []string {
	var out []string
	home := p.HomeOf(ns)
	for n, t := range p.Tenants {
		if t != home && matchAny(t.ClaimableFrom, ns) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func (p *Policy) claimed(c Caller, claim string) (*Tenant, error) {
	t := p.Tenants[claim]
	if t == nil {
		return nil, fmt.Errorf("annotation %s=%q: no such tenant in %s (%s): %w",
			annotations.Tenant, claim, p.Path, c, errdefs.ErrPermissionDenied)
	}
	return t, nil
}

// tenantOf returns the tenant whose patterns (picked by field) match ns:
// an exact name first, else the longest "prefix*" pattern ("*" last).
func (p *Policy) tenantOf(ns string, field func(*Tenant) []string) *Tenant {
	var best *Tenant
	bestLen := -1
	for _, n := range p.TenantNames() {
		t := p.Tenants[n]
		for _, pat := range field(t) {
			if pat == ns {
				return t
			}
			if pre, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(ns, pre) && len(pre) > bestLen {
				best, bestLen = t, len(pre)
			}
		}
	}
	return best
}

func matchAny(patterns []string, ns string) bool {
	for _, pat := range patterns {
		if pat == ns {
			return true
		}
		if pre, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(ns, pre) {
			return true
		}
	}
	return false
}

// Decision is what a tenant's policy grants one container.
type Decision struct {
	// Devices to inject: the annotation's, or the tenant's allowed devices
	// present on the node when the annotation names none; nil means every
	// device of the node.
	Devices []string
	// QPs charged to the tenant: the tenant's per-container qps when it
	// sets one (the zygote's QPLimit then: what it may really hold), else
	// swift.io/pool × the number of peers for a zygote with peers.
	QPs uint64
	// QPLimit is the zygote's limit on the QPs it holds (0: none).
	QPLimit uint64
}

// AdmitAllocated checks the devices allocated to a container (by a
// device plugin, CDI or DRA, before the shim saw it) against the tenant's
// devices: the container can open every one, so each must be the
// tenant's. The platform made the allocation, so a refusal is
// PermissionDenied, naming the device.
func (t *Tenant) AdmitAllocated(allocated []string) error {
	if t.Devices == nil {
		return nil
	}
	for _, n := range allocated {
		if !slices.Contains(t.Devices, n) {
			return fmt.Errorf("device %q is allocated to the container, but tenant %q may not use it (allowed: %s): %w",
				n, t.Name, listOrNone(t.Devices), errdefs.ErrPermissionDenied)
		}
	}
	return nil
}

// Admit checks a container's request against the tenant: devices, peers,
// the zygote and the QP count. present lists the node's devices. Requests
// outside the policy are InvalidArgument errors naming the annotation.
func (t *Tenant) Admit(o annotations.Options, present []string) (Decision, error) {
	var d Decision
	zygote := o.Zygote != nil && *o.Zygote
	if zygote && !t.ForkSharing && !t.Unlimited {
		return d, fmt.Errorf("annotation %s=true: tenant %q may not use the zygote (fork sharing); set %s = true to allow it: %w",
			annotations.Zygote, t.Name, t.Key("fork_sharing"), errdefs.ErrInvalidArgument)
	}
	if t.Devices != nil {
		allowed := map[string]bool{}
		for _, n := range t.Devices {
			allowed[n] = true
		}
		if len(o.Devices) > 0 {
			for _, n := range o.Devices {
				if !allowed[n] {
					return d, fmt.Errorf("annotation %s=%q: device %q is not allowed for tenant %q (allowed: %s): %w",
						annotations.Devices, strings.Join(o.Devices, ","), n, t.Name, listOrNone(t.Devices), errdefs.ErrInvalidArgument)
				}
			}
		} else {
			d.Devices = []string{}
			for _, n := range present {
				if allowed[n] {
					d.Devices = append(d.Devices, n)
				}
			}
			if len(d.Devices) == 0 {
				return d, fmt.Errorf("none of tenant %q's devices (%s) is present on this node (present: %s): %w",
					t.Name, listOrNone(t.Devices), listOrNone(present), errdefs.ErrFailedPrecondition)
			}
		}
	}
	if t.Peers != nil {
		for _, p := range o.Peers {
			addr, err := netip.ParseAddr(p.Host)
			if err != nil {
				// a host name: the zygote checks the address it resolves
				// to against the rules (DialRules) before it dials; here
				// only its port can be
				if !t.allowsPeerPort(p.Port) {
					return d, fmt.Errorf("annotation %s: peer %s=%s:%d: no peer rule of tenant %q allows port %d (allowed: %s): %w",
						annotations.Peers, p.Name, p.Host, p.Port, t.Name, p.Port, t.peerList(), errdefs.ErrInvalidArgument)
				}
				continue
			}
			if !t.AllowsPeer(addr, p.Port) {
				return d, fmt.Errorf("annotation %s: peer %s=%s is not allowed for tenant %q (allowed: %s): %w",
					annotations.Peers, p.Name, netip.AddrPortFrom(addr, p.Port), t.Name, t.peerList(), errdefs.ErrInvalidArgument)
			}
		}
	}
	d.QPs = t.Container.QPs
	if zygote && len(o.Peers) > 0 {
		pool := o.Pool
		if pool == 0 {
			pool = 1
		}
		d.QPs = uint64(pool) * uint64(len(o.Peers))
		if t.Container.QPs > 0 && d.QPs > t.Container.QPs {
			return d, fmt.Errorf("annotations %s × %s: %d × %d peers = %d QPs is above tenant %q's per-container limit %s = %d: %w",
				annotations.Pool, annotations.Peers, pool, len(o.Peers), d.QPs, t.Name, t.Key("container.qps"), t.Container.QPs, errdefs.ErrInvalidArgument)
		}
	}
	if t.Container.QPs > 0 {
		// the charge is what the container may really hold: its zygote
		// (on-demand rows, rows held for peers, own QPs) stops there
		d.QPs = t.Container.QPs
		if zygote {
			d.QPLimit = t.Container.QPs
		}
	}
	return d, nil
}

// AllowsPeer tells whether the tenant's zygotes may connect to addr:port.
func (t *Tenant) AllowsPeer(addr netip.Addr, port uint16) bool {
	if t.Peers == nil {
		return true
	}
	for _, r := range t.Peers {
		if r.Allows(addr, port) {
			return true
		}
	}
	return false
}

// allowsPeerPort tells whether an IPv4 rule of the tenant allows port
// (a host-name peer resolves to IPv4).
func (t *Tenant) allowsPeerPort(port uint16) bool {
	rules, _ := t.DialRules()
	for _, r := range rules {
		if port >= r.MinPort && port <= r.MaxPort {
			return true
		}
	}
	return false
}

// DialRules returns the tenant's IPv4 peer rules, those a zygote checks
// the peers it dials against (its exchange dials IPv4), and whether the
// tenant restricts peers at all (false: any peer).
func (t *Tenant) DialRules() ([]PeerRule, bool) {
	if t.Peers == nil {
		return nil, false
	}
	rules := []PeerRule{}
	for _, r := range t.Peers {
		// an IPv4-mapped IPv6 rule (::ffff:10.0.0.0/104) is an IPv6
		// one: it matches no address a zygote dials
		if r.Prefix.Addr().Is4() {
			rules = append(rules, r)
		}
	}
	return rules, true
}

// PeerNetworks returns the networks of the tenant's peer rules, each once,
// and whether the tenant restricts peers at all (false: any peer).
func (t *Tenant) PeerNetworks() ([]netip.Prefix, bool) {
	if t.Peers == nil {
		return nil, false
	}
	seen := map[netip.Prefix]bool{}
	nets := []netip.Prefix{}
	for _, r := range t.Peers {
		if p := r.Prefix.Masked(); !seen[p] {
			seen[p] = true
			nets = append(nets, p)
		}
	}
	return nets, true
}

func (t *Tenant) peerList() string {
	var s []string
	for _, r := range t.Peers {
		s = append(s, r.Text)
	}
	return listOrNone(s)
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
