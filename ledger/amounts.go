package ledger

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/config"
)

// Amounts are resource amounts: a lease's charge, a tenant's usage, or a
// quota (where 0 means no limit).
type Amounts struct {
	Containers uint64 `json:"containers"`
	QPs        uint64 `json:"qps"`
	HCAHandle  uint64 `json:"hca_handle"`
	HCAObject  uint64 `json:"hca_object"`
	Memlock    uint64 `json:"memlock"`
}

// Resources names the resources in the order messages and tables list them.
var Resources = []string{"containers", "qps", "hca_handle", "hca_object", "memlock"}

// Get returns the amount of resource (one of Resources).
func (a Amounts) Get(resource string) uint64 {
	switch resource {
	case "containers":
		return a.Containers
	case "qps":
		return a.QPs
	case "hca_handle":
		return a.HCAHandle
	case "hca_object":
		return a.HCAObject
	case "memlock":
		return a.Memlock
	}
	return 0
}

// Add returns a+b, saturating at the largest uint64 (which prints as unlimited memlock).
func (a Amounts) Add(b Amounts) Amounts {
	return Amounts{sat(a.Containers, b.Containers), sat(a.QPs, b.QPs), sat(a.HCAHandle, b.HCAHandle),
		sat(a.HCAObject, b.HCAObject), sat(a.Memlock, b.Memlock)}
}

func sat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// Format prints an amount of resource: bytes for memlock.
func Format(resource string, n uint64) string {
	if resource != "memlock" {
		return strconv.FormatUint(n, 10)
	}
	return config.FormatBytes(n)
}

// Quota is a tenant's node-wide quota (zero fields: no limit) and where it
// comes from, for messages.
type Quota struct {
	Limit  Amounts
	Source string
	// UIDRanges, when above 0, gives the lease a function uid range of
	// its own: the lowest index below UIDRanges no live lease holds.
	UIDRanges int
}

// UIDRangeError is an Acquire refused because every function uid range of
// the node is held by a live lease. It is a ResourceExhausted error.
type UIDRangeError struct {
	Ranges int
}

func (e *UIDRangeError) Error() string {
	return fmt.Sprintf("all %d function uid ranges of this node are held by running zygote containers: %v", e.Ranges, errdefs.ErrResourceExhausted)
}

// Unwrap makes UIDRangeError a ResourceExhausted error.
func (e *UIDRangeError) Unwrap() error { return errdefs.ErrResourceExhausted }

// QuotaError is an Acquire refused because the tenant's node-wide quota is
// used up. It is a ResourceExhausted error.
type QuotaError struct {
	Tenant, Resource   string
	Limit, Used, Asked uint64
	Source             string
}

func (e *QuotaError) Error() string {
	s := fmt.Sprintf("tenant %q is over its node-wide %s quota: limit %s, in use %s, this container asks %s",
		e.Tenant, e.Resource, Format(e.Resource, e.Limit), Format(e.Resource, e.Used), Format(e.Resource, e.Asked))
	if e.Source != "" {
		s += " (" + e.Source + ")"
	}
	return s + ": " + errdefs.ErrResourceExhausted.Error()
}

// Unwrap makes QuotaError a ResourceExhausted error.
func (e *QuotaError) Unwrap() error { return errdefs.ErrResourceExhausted }

// Usage sums the charges of leases per tenant.
func Usage(leases []Lease) map[string]Amounts {
	u := map[string]Amounts{}
	for _, x := range leases {
		u[x.Tenant] = u[x.Tenant].Add(x.Charge)
	}
	return u
}

// Tenants returns, sorted, every tenant that uses or has a quota: the
// names of used and quotas together.
func Tenants(used, quotas map[string]Amounts) []string {
	names := make([]string, 0, len(used)+len(quotas))
	for n := range used {
		names = append(names, n)
	}
	for n := range quotas {
		if _, dup := used[n]; !dup {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}
