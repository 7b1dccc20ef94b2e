package policy

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/config/tomlfile"
	"github.com/swift-rdma/swift-containerd/ledger"
)

// DefaultPath is where the tenant policy lives unless overridden (the node
// config's policy_path, or $SWIFT_POLICY).
const DefaultPath = config.DefaultPolicyPath

// DefaultTenant is the tenant of containers that name none when no policy
// file exists.
const DefaultTenant = "default"

// Seccomp levels.
const (
	SeccompNone     = "none"
	SeccompBaseline = "baseline"
)

// ObjectsPerQP is what one QP of a zygote costs in verbs objects (the
// rdma cgroup's hca_object): a pool row's PD, MR, CQ and QP, or a
// function's own QP with its CQ (and its context's PD and MR). With a QP
// quota, a container's hca_object limit is its QP charge times this.
const ObjectsPerQP = 4

// MaxQPs bounds the qps keys (a container cannot ask for more than
// swift.io/pool × peers = annotations.MaxQPs anyway; this only catches typos).
const MaxQPs = 1 << 24

// NetCapabilities are the capabilities a policy takes from opted-in
// containers unless their tenant keeps them (net_capabilities): with
// CAP_NET_RAW a host-network container reads and forges every packet of
// its node, RoCE traffic included; with CAP_NET_ADMIN it can reconfigure
// or mirror the RoCE link.
var NetCapabilities = []string{"CAP_NET_ADMIN", "CAP_NET_RAW"}

// Policy is a validated tenant policy.
type Policy struct {
	// Path is the file the policy came from; "" for the implicit open policy.
	Path string
	// LocalTenant is the tenant of a local caller (no CRI sandbox
	// namespace) that names none with swift.io/tenant; "" refuses them.
	LocalTenant string
	// Tenants by name.
	Tenants map[string]*Tenant
	open    bool
}

// Tenant is one [tenants.NAME] table.
type Tenant struct {
	Name string
	// Namespaces are the Kubernetes namespaces whose pods belong to the
	// tenant: exact names, "prefix-*" patterns, or "*".
	Namespaces []string
	// ClaimableFrom are further namespaces (same patterns) whose pods may
	// claim the tenant with swift.io/tenant.
	ClaimableFrom []string
	// Local lets local callers (ctr, nerdctl: no CRI sandbox namespace)
	// claim the tenant with swift.io/tenant.
	Local bool
	// Devices the tenant may use; nil means every device of the node.
	Devices []string
	// Peers the tenant's zygotes may connect to; nil means any.
	Peers []PeerRule
	// ForkSharing allows swift.io/zygote=true.
	ForkSharing bool
	// Seccomp is the tenant's seccomp level (SeccompNone or SeccompBaseline).
	Seccomp string
	// NetCapabilities are those of NetCapabilities the tenant's opted-in
	// containers keep; the others are taken from them.
	NetCapabilities []string
	// KeyFile is the tenant's keyring, the same on every node (absolute
	// path); "" falls back to the node's keys_dir, then a node-local key.
	KeyFile string
	// Container holds per-container limits; Node the tenant's node-wide quota.
	Container Limits
	Node      Quota
	// Unlimited marks the tenants of the implicit open policy.
	Unlimited bool
}

// Limits are per-container limits; 0 means not set.
type Limits struct {
	// QPs bounds swift.io/pool × peers and is the QP charge of a container
	// that names no peers.
	QPs uint64
	// HCAHandle and HCAObject become linux.resources.rdma per device.
	HCAHandle uint32
	HCAObject uint32
	// Memlock caps RLIMIT_MEMLOCK (config.MemlockUnlimited: no cap).
	Memlock uint64
}

// Quota is a tenant's node-wide quota over all its containers; 0 means no quota.
type Quota struct {
	Containers uint64
	QPs        uint64
	HCAHandle  uint64
	HCAObject  uint64
	Memlock    uint64
}

// Amounts is the quota in the ledger's terms (0: no limit).
func (q Quota) Amounts() ledger.Amounts {
	return ledger.Amounts{Containers: q.Containers, QPs: q.QPs, HCAHandle: q.HCAHandle, HCAObject: q.HCAObject, Memlock: q.Memlock}
}

// PeerRule is one entry of a tenant's peers: a network and a port range.
type PeerRule struct {
	Prefix netip.Prefix
	// MinPort..MaxPort, both inclusive; 1..65535 when the entry names no port.
	MinPort, MaxPort uint16
	// Text is the entry as written.
	Text string
}

// Allows tells whether addr:port falls inside the rule.
func (r PeerRule) Allows(addr netip.Addr, port uint16) bool {
	return r.Prefix.Contains(addr.Unmap()) && port >= r.MinPort && port <= r.MaxPort
}

// Key returns the policy key of one of the tenant's settings, for messages
// ("tenants.NAME.node.qps").
func (t *Tenant) Key(key string) string { return "tenants." + t.Name + "." + key }

// Open returns the implicit policy of a node without a policy file: any
// tenant name is accepted from any caller (default "default"), with every
// device, any peer, the zygote allowed, no seccomp additions and no limits.
func Open() *Policy {
	return &Policy{open: true, LocalTenant: DefaultTenant, Tenants: map[string]*Tenant{}}
}

// IsOpen tells whether p is the implicit open policy (no policy file):
// nothing is enforced and no ledger is kept.
func (p *Policy) IsOpen() bool { return p.open }

// TenantNames returns the names of p's tenants, sorted.
func (p *Policy) TenantNames() []string {
	names := make([]string, 0, len(p.Tenants))
	for n := range p.Tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NodeQuotas returns each tenant's node-wide quota (zero where the policy
// sets none), by tenant name.
func (p *Policy) NodeQuotas() map[string]ledger.Amounts {
	q := make(map[string]ledger.Amounts, len(p.Tenants))
	for n, t := range p.Tenants {
		q[n] = t.Node.Amounts()
	}
	return q
}

// LoadNode loads the policy the node config names (cfg.PolicyFile), and
// fails closed when it is missing: policy_path = "" is the only way to run
// without a policy (Open). The one exception is the built-in default path
// on a node that never enforced a policy (no ledger in state_dir): a fresh
// install without a policy file runs open, and `swiftctl doctor` warns.
// A missing file that was configured (policy_path, $SWIFT_POLICY) or that
// was deleted after the node used it is a FailedPrecondition error naming
// the path; an unreadable or malformed one is InvalidArgument (Load).
func LoadNode(cfg config.Config) (*Policy, error) { return loadNode(cfg, DefaultPath) }

func loadNode(cfg config.Config, defaultPath string) (*Policy, error) {
	path := cfg.PolicyFile()
	if path == "" {
		return Open(), nil
	}
	// read once: a file removed between a check and the read must not
	// turn into the open policy
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		led := filepath.Join(cfg.StateDir, ledger.FileName)
		_, lerr := os.Stat(led)
		switch {
		case path != defaultPath || cfg.PolicyNamed():
			return nil, fmt.Errorf("tenant policy %s (policy_path or $%s) does not exist: no RDMA container is created without it "+
				"(fix the path, or set policy_path = \"\" to run without a policy): %w", path, config.EnvPolicy, errdefs.ErrFailedPrecondition)
		case lerr == nil:
			return nil, fmt.Errorf("tenant policy %s does not exist, but this node enforced one (%s exists): no RDMA container is created "+
				"until it is restored (or set policy_path = \"\" to run without a policy): %w", path, led, errdefs.ErrFailedPrecondition)
		}
		return Open(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read tenant policy %s: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	return Parse(path, data)
}

// Load reads and validates the policy at path. A missing file yields
// Open() (LoadNode decides whether a missing file is allowed); an
// unreadable or malformed one an InvalidArgument error naming the file
// (and the line of every problem).
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Open(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read tenant policy %s: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	return Parse(path, data)
}

// Problem is one thing wrong in a policy file: its line (0 when unknown),
// its key as the file spells it (when known) and what is wrong.
type Problem = tomlfile.Problem

// Error is a malformed policy: every problem found, in line order. It is
// an InvalidArgument error (errdefs.IsInvalidArgument).
type Error = tomlfile.Error

type rawPolicy struct {
	LocalTenant *string              `toml:"local_tenant"`
	Tenants     map[string]rawTenant `toml:"tenants"`
}

type rawTenant struct {
	Namespaces    []string  `toml:"namespaces"`
	ClaimableFrom []string  `toml:"claimable_from"`
	Local         bool      `toml:"local"`
	Devices       *[]string `toml:"devices"`
	Peers         *[]string `toml:"peers"`
	ForkSharing   bool      `toml:"fork_sharing"`
	Seccomp       *string   `toml:"seccomp"`
	NetCaps       []string  `toml:"net_capabilities"`
	KeyFile       *string   `toml:"key_file"`
	Container     rawLimits `toml:"container"`
	Node          rawQuota  `toml:"node"`
}

type rawLimits struct {
	QPs       *int64  `toml:"qps"`
	HCAHandle *int64  `toml:"hca_handle"`
	HCAObject *int64  `toml:"hca_object"`
	Memlock   *string `toml:"memlock"`
}

type rawQuota struct {
	Containers *int64  `toml:"containers"`
	QPs        *int64  `toml:"qps"`
	HCAHandle  *int64  `toml:"hca_handle"`
	HCAObject  *int64  `toml:"hca_object"`
	Memlock    *string `toml:"memlock"`
}

// Parse decodes and validates a policy (named name in errors). Every
// problem of the file is reported in one pass, in line order: unknown
// keys, values of the wrong type and invalid values alike.
func Parse(name string, data []byte) (*Policy, error) {
	var raw rawPolicy
	pos, problems, parsed := tomlfile.Decode(data, &raw)
	e := &Error{What: "tenant policy", File: name, Problems: problems}
	if !parsed {
		return nil, e
	}
	p := &Policy{Path: name, Tenants: map[string]*Tenant{}}
	v := validator{pos: pos}
	names := make([]string, 0, len(raw.Tenants))
	for n := range raw.Tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 && !slices.ContainsFunc(problems, func(p Problem) bool { return p.Key == "tenants" }) {
		v.add("tenants", "the policy defines no tenant: add a [tenants.NAME] table (with no policy file at all, every container gets the open \"default\" tenant)")
	}
	for _, n := range names {
		if t := v.tenant(n, raw.Tenants[n]); t != nil {
			p.Tenants[n] = t
		}
	}
	v.overlaps(p)
	if raw.LocalTenant != nil {
		lt := *raw.LocalTenant
		switch {
		case !annotations.IsLabel(lt):
			v.add("local_tenant", fmt.Sprintf("%q is not a tenant name (a lowercase DNS label)", lt))
		case !hasKey(raw.Tenants, lt):
			v.add("local_tenant", fmt.Sprintf("names tenant %q, which the policy does not define (defined: %s)", lt, listOrNone(names)))
		default:
			p.LocalTenant = lt
		}
	}
	if problems = append(problems, v.problems...); len(problems) > 0 {
		tomlfile.Sort(problems)
		e.Problems = problems
		return nil, e
	}
	return p, nil
}

func hasKey[V any](m map[string]V, k string) bool { _, ok := m[k]; return ok }

// validator collects problems with their lines.
type validator struct {
	pos      *tomlfile.Positions
	problems []Problem
}

func (v *validator) add(key, msg string) {
	v.problems = append(v.problems, Problem{Line: v.pos.Line(key), Key: key, Msg: msg})
}

func (v *validator) tenant(name string, r rawTenant) *Tenant {
	base := tomlfile.Join("tenants", name)
	n0 := len(v.problems)
	if !annotations.IsLabel(name) {
		v.add(base, fmt.Sprintf("tenant name %q is not a lowercase DNS label (a-z, 0-9, '-', at most 63 characters)", name))
	}
	t := &Tenant{Name: name, Local: r.Local, ForkSharing: r.ForkSharing, Seccomp: SeccompBaseline}
	t.Namespaces = v.patterns(base+".namespaces", r.Namespaces)
	t.ClaimableFrom = v.patterns(base+".claimable_from", r.ClaimableFrom)
	if r.Devices != nil {
		t.Devices = []string{}
		seen := map[string]bool{}
		for i, d := range *r.Devices {
			k := fmt.Sprintf("%s.devices[%d]", base, i)
			switch {
			case !annotations.IsDeviceName(d):
				v.add(k, fmt.Sprintf("%q is not an RDMA device name", d))
			case seen[d]:
				v.add(k, fmt.Sprintf("device %q listed twice", d))
			default:
				seen[d] = true
				t.Devices = append(t.Devices, d)
			}
		}
	}
	if r.Peers != nil {
		t.Peers = []PeerRule{}
		for i, s := range *r.Peers {
			k := fmt.Sprintf("%s.peers[%d]", base, i)
			pr, err := ParsePeerRule(s)
			if err != nil {
				v.add(k, err.Error())
				continue
			}
			t.Peers = append(t.Peers, pr)
		}
		if nets, _ := t.PeerNetworks(); len(nets) > annotations.MaxPeers {
			v.add(base+".peers", fmt.Sprintf("%d networks; a zygote takes exchange connections from at most %d", len(nets), annotations.MaxPeers))
		}
		if rules, _ := t.DialRules(); len(rules) > annotations.MaxPeers {
			v.add(base+".peers", fmt.Sprintf("%d IPv4 rules; a zygote checks the peers it dials against at most %d", len(rules), annotations.MaxPeers))
		}
	}
	if r.Seccomp != nil {
		switch *r.Seccomp {
		case SeccompNone, SeccompBaseline:
			t.Seccomp = *r.Seccomp
		default:
			v.add(base+".seccomp", fmt.Sprintf("%q: want %q or %q", *r.Seccomp, SeccompNone, SeccompBaseline))
		}
	}
	seenCap := map[string]bool{}
	for i, c := range r.NetCaps {
		k := fmt.Sprintf("%s.net_capabilities[%d]", base, i)
		switch {
		case !slices.Contains(NetCapabilities, c):
			v.add(k, fmt.Sprintf("%q: want one of %s", c, strings.Join(NetCapabilities, ", ")))
		case seenCap[c]:
			v.add(k, fmt.Sprintf("%q listed twice", c))
		default:
			seenCap[c] = true
			t.NetCapabilities = append(t.NetCapabilities, c)
		}
	}
	if r.KeyFile != nil {
		if !filepath.IsAbs(*r.KeyFile) || filepath.Clean(*r.KeyFile) != *r.KeyFile {
			v.add(base+".key_file", fmt.Sprintf("%q: want an absolute, clean path to the tenant's keyring", *r.KeyFile))
		} else {
			t.KeyFile = *r.KeyFile
		}
	}
	c, q := base+".container", base+".node"
	t.Container.QPs = v.count(c+".qps", r.Container.QPs, MaxQPs)
	t.Container.HCAHandle = uint32(v.count(c+".hca_handle", r.Container.HCAHandle, math.MaxUint32))
	t.Container.HCAObject = uint32(v.count(c+".hca_object", r.Container.HCAObject, math.MaxUint32))
	t.Container.Memlock = v.memlock(c+".memlock", r.Container.Memlock)
	t.Node.Containers = v.count(q+".containers", r.Node.Containers, math.MaxInt64)
	t.Node.QPs = v.count(q+".qps", r.Node.QPs, math.MaxInt64)
	t.Node.HCAHandle = v.count(q+".hca_handle", r.Node.HCAHandle, math.MaxInt64)
	t.Node.HCAObject = v.count(q+".hca_object", r.Node.HCAObject, math.MaxInt64)
	t.Node.Memlock = v.memlock(q+".memlock", r.Node.Memlock)
	if t.Node.Memlock == config.MemlockUnlimited {
		t.Node.Memlock = 0 // an unlimited quota is no quota
	}

	// A node quota needs a per-container charge, and a per-container limit
	// above the node quota could never be met.
	type pair struct {
		res        string
		per, total uint64
	}
	for _, pr := range []pair{
		{"qps", t.Container.QPs, t.Node.QPs},
		{"hca_handle", uint64(t.Container.HCAHandle), t.Node.HCAHandle},
		{"hca_object", uint64(t.Container.HCAObject), t.Node.HCAObject},
		{"memlock", t.Container.Memlock, t.Node.Memlock},
	} {
		switch {
		case pr.total == 0:
		case pr.per == 0 || pr.per == config.MemlockUnlimited:
			v.add(q+"."+pr.res, fmt.Sprintf("a node-wide quota needs a finite per-container limit to charge each container: set %s.%s", c, pr.res))
		case pr.per > pr.total:
			v.add(c+"."+pr.res, fmt.Sprintf("per-container limit %s is above the tenant's node-wide quota %s.%s = %s: no container could ever start",
				fmtAmount(pr.res, pr.per), q, pr.res, fmtAmount(pr.res, pr.total)))
		}
	}
	if len(v.problems) > n0 {
		return nil
	}
	return t
}

func fmtAmount(res string, n uint64) string {
	if res == "memlock" {
		return HumanBytes(n)
	}
	return strconv.FormatUint(n, 10)
}

// patterns validates namespace names and patterns.
func (v *validator) patterns(key string, in []string) []string {
	var out []string
	seen := map[string]bool{}
	for i, s := range in {
		k := fmt.Sprintf("%s[%d]", key, i)
		switch {
		case s == "*" || annotations.IsLabel(s) || annotations.IsLabelPattern(s):
			if seen[s] {
				v.add(k, fmt.Sprintf("%q listed twice", s))
				continue
			}
			seen[s] = true
			out = append(out, s)
		default:
			v.add(k, fmt.Sprintf("%q is not a namespace name (a lowercase DNS label), a \"prefix*\" pattern or \"*\"", s))
		}
	}
	return out
}

func (v *validator) count(key string, p *int64, max uint64) uint64 {
	if p == nil {
		return 0
	}
	if *p < 1 || uint64(*p) > max {
		v.add(key, fmt.Sprintf("%d: want 1 to %d (remove the key for no limit)", *p, max))
		return 0
	}
	return uint64(*p)
}

func (v *validator) memlock(key string, p *string) uint64 {
	if p == nil {
		return 0
	}
	n, err := config.ParseMemlock(*p)
	if err != nil {
		v.add(key, strings.TrimSuffix(err.Error(), ": "+errdefs.ErrInvalidArgument.Error()))
		return 0
	}
	return n
}

// overlaps refuses a namespace (or pattern) that maps to two tenants.
func (v *validator) overlaps(p *Policy) {
	owner := map[string]string{}
	for _, n := range p.TenantNames() {
		for i, ns := range p.Tenants[n].Namespaces {
			if o, ok := owner[ns]; ok {
				v.add(fmt.Sprintf("%s.namespaces[%d]", tomlfile.Join("tenants", n), i),
					fmt.Sprintf("namespace %q already maps to tenant %q: a namespace belongs to one tenant (use claimable_from to share)", ns, o))
				continue
			}
			owner[ns] = n
		}
	}
}

// ParsePeerRule parses "CIDR", "CIDR:PORT", "CIDR:LOW-HIGH", "[IPv6CIDR]:PORT".
func ParsePeerRule(s string) (PeerRule, error) {
	r := PeerRule{Text: s, MinPort: 1, MaxPort: 65535}
	cidr, ports := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return r, fmt.Errorf("%q: missing ']' after the IPv6 network", s)
		}
		cidr, ports = s[1:end], s[end+1:]
		if ports != "" {
			if !strings.HasPrefix(ports, ":") {
				return r, fmt.Errorf("%q: want [IPv6/bits]:PORT", s)
			}
			ports = ports[1:]
		}
	} else if strings.Count(s, ":") == 1 {
		cidr, ports, _ = strings.Cut(s, ":")
	}
	if !strings.Contains(cidr, "/") {
		return r, fmt.Errorf("%q: want a network in CIDR notation with an optional port or port range (10.0.0.0/8, 10.0.0.0/8:18515, 10.0.0.0/8:18000-18999, [fd00::/8]:18515)", s)
	}
	pfx, err := netip.ParsePrefix(cidr)
	if err != nil {
		return r, fmt.Errorf("%q: %q is not a network in CIDR notation", s, cidr)
	}
	if pfx.Masked() != pfx {
		return r, fmt.Errorf("%q: %s has host bits set; the network is %s", s, cidr, pfx.Masked())
	}
	r.Prefix = pfx
	if ports != "" {
		lo, hi, isRange := strings.Cut(ports, "-")
		if !isRange {
			hi = lo
		}
		l, err1 := strconv.ParseUint(lo, 10, 16)
		h, err2 := strconv.ParseUint(hi, 10, 16)
		if err1 != nil || err2 != nil || l == 0 || h == 0 {
			return r, fmt.Errorf("%q: port %q is not 1-65535 or a range LOW-HIGH of them", s, ports)
		}
		if l > h {
			return r, fmt.Errorf("%q: port range %s is empty (LOW above HIGH)", s, ports)
		}
		r.MinPort, r.MaxPort = uint16(l), uint16(h)
	}
	return r, nil
}

// HumanBytes formats a byte count the way the config accepts it.
func HumanBytes(n uint64) string { return config.FormatBytes(n) }
