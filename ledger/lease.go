package ledger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
)

// Lease is what one container holds.
type Lease struct {
	Namespace string    `json:"namespace"`
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	Devices   []string  `json:"devices"`
	Charge    Amounts   `json:"charge"`
	Bundle    string    `json:"bundle"`
	Owner     Owner     `json:"owner"`
	Created   time.Time `json:"created"`
	// Listen is the QP exchange port the container's zygote listens on
	// (nil: none): two live leases never hold one port in one network
	// namespace.
	Listen *Listen `json:"listen,omitempty"`
	// UIDRange is the range of function uids the container's zygote gives
	// its functions (nil: none of its own), an index below the ranges
	// Acquire was given: two live leases never hold one.
	UIDRange *int `json:"uid_range,omitempty"`
}

// Listen is a zygote's exchange address and the network namespace it
// listens in.
type Listen struct {
	// NetNS names the network namespace, "netns:DEV:INO" (the node's own
	// for a container of the host network, a pod's for its containers).
	NetNS string `json:"netns"`
	Host  string `json:"host"` // IPv4, 0.0.0.0 for every address
	Port  uint16 `json:"port"`
}

// Conflicts tells whether a and b cannot both listen: one namespace, one
// port, and the same address or the wildcard on either side.
func (a Listen) Conflicts(b Listen) bool {
	return a.NetNS == b.NetNS && a.Port == b.Port &&
		(a.Host == b.Host || a.Host == "0.0.0.0" || b.Host == "0.0.0.0")
}

func (a Listen) String() string { return fmt.Sprintf("%s:%d", a.Host, a.Port) }

// PortError is an Acquire refused because another live lease's zygote
// listens on the port asked for. Its message does not name the holder
// (it may be another tenant's): Holder is for the node's own log.
type PortError struct {
	Want   Listen
	Holder string // the holder's key, namespace/ID
}

func (e *PortError) Error() string {
	return fmt.Sprintf("the zygote's exchange port %s is held by another zygote in the same network namespace: give each zygote its own port (annotation swift.io/listen, and the peers that dial it): %v",
		e.Want, errdefs.ErrFailedPrecondition)
}

// Unwrap makes PortError a FailedPrecondition error.
func (e *PortError) Unwrap() error { return errdefs.ErrFailedPrecondition }

// Key is the lease's key: namespace/ID.
func (l Lease) Key() string { return l.Namespace + "/" + l.ID }

func decode(k, v []byte) (Lease, error) {
	var x Lease
	if err := json.Unmarshal(v, &x); err != nil {
		return x, fmt.Errorf("lease %q does not decode (%v; `swiftctl pools repair` rebuilds the ledger): %w", k, err, errdefs.ErrDataLoss)
	}
	return x, nil
}

// BundleFile is the copy of a container's lease the shim keeps in its
// bundle: what `swiftctl pools repair` rebuilds a lost ledger from.
const BundleFile = "swift-lease.json"
