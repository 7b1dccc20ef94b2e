// Package metrics is Swift's node metrics: what the node agent
// (swift-node) serves to Prometheus, and how the components that know each
// figure hand it over without ever waiting for the agent.
//
//   - Create outcomes and latency: each shim sends one datagram per Create
//     (Report) to the agent's socket in the state dir, which only root can
//     reach, without blocking: an agent that is down, stalled or flooded
//     loses the report, never the Create (Send).
//   - Leases and quotas per tenant: from the ledger's snapshot, which every
//     ledger writer leaves behind, so the agent never holds the ledger's
//     lock (ledger.Snapshot).
//   - Pool figures per zygote container: from the status file each zygote
//     keeps in its container, read through the container's root without
//     following anything out of it (Collector).
//   - Device port state and the verbs cache's validity: read when scraped.
package metrics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// SocketName is the agent's report socket in the node's state dir.
const SocketName = "agent.sock"

// SocketPath is the report socket of the node whose state dir is stateDir.
func SocketPath(stateDir string) string { return filepath.Join(stateDir, SocketName) }

// The outcomes of a Create.
const (
	// OutcomeLeft: the container does not opt in; it is left as it is.
	OutcomeLeft = "left"
	// OutcomeInjected: RDMA injected, without a zygote.
	OutcomeInjected = "injected"
	// OutcomeZygote: RDMA injected, with a zygote as the container's init.
	OutcomeZygote = "zygote"
	// OutcomeRefused: Swift refused the container (Reason: the class).
	OutcomeRefused = "refused"
	// OutcomeFailed: Swift prepared it, runc failed to create it.
	OutcomeFailed = "failed"
)

// Outcomes lists the outcomes, in order.
var Outcomes = []string{OutcomeLeft, OutcomeInjected, OutcomeZygote, OutcomeRefused, OutcomeFailed}

// classes are the errdefs classes a refusal is counted under, in the
// order they are tried.
var classes = []struct {
	name string
	is   func(error) bool
}{
	{"invalid_argument", errdefs.IsInvalidArgument},
	{"permission_denied", errdefs.IsPermissionDenied},
	{"failed_precondition", errdefs.IsFailedPrecondition},
	{"resource_exhausted", errdefs.IsResourceExhausted},
	{"not_found", errdefs.IsNotFound},
	{"already_exists", errdefs.IsAlreadyExists},
	{"conflict", errdefs.IsConflict},
	{"unavailable", errdefs.IsUnavailable},
	{"data_loss", errdefs.IsDataLoss},
	{"deadline_exceeded", errdefs.IsDeadlineExceeded},
	{"canceled", errdefs.IsCanceled},
	{"not_implemented", errdefs.IsNotImplemented},
	{"internal", errdefs.IsInternal},
}

// ReasonUnknown is the reason of an error of no errdefs class.
const ReasonUnknown = "unknown"

// Reason is the label a refusal is counted under: its errdefs class.
func Reason(err error) string {
	for _, c := range classes {
		if c.is(err) {
			return c.name
		}
	}
	return ReasonUnknown
}

func knownReason(r string) bool {
	if r == ReasonUnknown {
		return true
	}
	for _, c := range classes {
		if c.name == r {
			return true
		}
	}
	return false
}

// Report is one Create, as a shim sends it.
type Report struct {
	Outcome string `json:"outcome"`
	// Reason is a refusal's or failure's class (Reason), "" otherwise.
	Reason  string  `json:"reason,omitempty"`
	Seconds float64 `json:"seconds"`
}

// MaxReport bounds a report datagram.
const MaxReport = 256

// maxSeconds bounds a Create's reported duration.
const maxSeconds = 3600

// Decode reads a report datagram: one JSON object, no unknown field, a
// known outcome, a known reason exactly where the outcome has one, and a
// duration within an hour. Anything else is InvalidArgument, naming what
// is wrong.
func Decode(b []byte) (Report, error) {
	var r Report
	if len(b) > MaxReport {
		return r, fmt.Errorf("report of %d bytes: at most %d: %w", len(b), MaxReport, errdefs.ErrInvalidArgument)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return Report{}, fmt.Errorf("report does not decode: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if d.More() {
		return Report{}, fmt.Errorf("report has data after its object: %w", errdefs.ErrInvalidArgument)
	}
	switch r.Outcome {
	case OutcomeLeft, OutcomeInjected, OutcomeZygote:
		if r.Reason != "" {
			return Report{}, fmt.Errorf("report outcome %q has a reason (%q): %w", r.Outcome, r.Reason, errdefs.ErrInvalidArgument)
		}
	case OutcomeRefused, OutcomeFailed:
		if !knownReason(r.Reason) {
			return Report{}, fmt.Errorf("report outcome %q has reason %q: not an error class: %w", r.Outcome, r.Reason, errdefs.ErrInvalidArgument)
		}
	default:
		return Report{}, fmt.Errorf("report outcome %q: not one of %v: %w", r.Outcome, Outcomes, errdefs.ErrInvalidArgument)
	}
	if math.IsNaN(r.Seconds) || r.Seconds < 0 || r.Seconds > maxSeconds {
		return Report{}, fmt.Errorf("report duration %v s: want 0 to %d: %w", r.Seconds, maxSeconds, errdefs.ErrInvalidArgument)
	}
	return r, nil
}

// Send hands r to the agent listening at path, without waiting: the
// socket is non-blocking, and a missing agent, a stale socket or a full
// queue drops the report (the error says which; a Create ignores it).
func Send(path string, r Report) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("report socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, b, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, &unix.SockaddrUnix{Name: path}); err != nil {
		if errors.Is(err, unix.EAGAIN) {
			return fmt.Errorf("report to %s: the agent's queue is full: %w", path, err)
		}
		return fmt.Errorf("report to %s: %w", path, err)
	}
	return nil
}
