package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/swift-rdma/swift-containerd/ledger"
)

// DeviceState is an RDMA device's port as the agent last read it.
type DeviceState struct {
	Name      string // the verbs name
	PortState string // port 1: ACTIVE, DOWN, ...
}

// Collector is the node's metrics, read when scraped (the ledger's
// snapshot, the zygotes' status files, the devices, the verbs cache)
// besides the Create reports counted as they come (Observe).
type Collector struct {
	// StateDir holds the ledger (and its snapshot).
	StateDir string
	// ProcRoot is where processes are seen ("/proc").
	ProcRoot string
	// Quotas returns each tenant's node quota under the policy (nil: none
	// are shown).
	Quotas func() (map[string]ledger.Amounts, error)
	// Devices returns the node's devices (nil: none are shown).
	Devices func() []DeviceState
	// VerbsCache returns the verbs cache's state: valid, stale, missing,
	// invalid (nil: not shown).
	VerbsCache func() string

	creates *prometheus.CounterVec
	latency *prometheus.HistogramVec
	dropped *prometheus.CounterVec

	// mu makes scrapes one at a time; stalled holds the containers whose
	// status read did not end within poolReadTimeout (a mount in the
	// container that hangs): they are not read again.
	mu      sync.Mutex
	stalled map[string]bool
	// read reads one zygote's figures (readPool; the tests' stand-in)
	read func(procRoot string, selfNS uint64, x ledger.Lease) (Pool, bool, error)
}

// poolReadTimeout bounds one zygote's status read.
const poolReadTimeout = 2 * time.Second

// ledgerWait bounds the wait for the ledger's lock when its snapshot
// cannot be used (a ledger written by an older writer).
const ledgerWait = 200 * time.Millisecond

var (
	descLeases  = prometheus.NewDesc("swift_tenant_leases", "Leases the tenant holds on the node (the ledger's, as of its last change).", []string{"tenant"}, nil)
	descUsage   = prometheus.NewDesc("swift_tenant_usage", "What the tenant's leases hold on the node, by resource (memlock in bytes).", []string{"tenant", "resource"}, nil)
	descQuota   = prometheus.NewDesc("swift_tenant_quota", "The tenant's node quota under the policy, by resource (only those it sets).", []string{"tenant", "resource"}, nil)
	descLedger  = prometheus.NewDesc("swift_ledger_snapshot_timestamp_seconds", "When the ledger last changed (its snapshot's time).", nil, nil)
	zygoteLabel = []string{"namespace", "container", "tenant", "pod_namespace", "pod"}
	descQPs     = prometheus.NewDesc("swift_zygote_qps", "A zygote's QPs: its pool's by state (free, assigned to a function, held by a peer's, pending, reclaim, broken), its functions' own connected on demand (own), and the pool's total.", append(zygoteLabel, "state"), nil)
	descLimit   = prometheus.NewDesc("swift_zygote_qp_limit", "The QPs the zygote's container may hold: its lease's charge (0: no limit).", zygoteLabel, nil)
	descPeers   = prometheus.NewDesc("swift_zygote_peers", "A zygote's peers by state: connected, waiting, refused.", append(zygoteLabel, "state"), nil)
	descPort    = prometheus.NewDesc("swift_device_port_active", "Whether the device's port 1 is ACTIVE (1) or not (0).", []string{"device"}, nil)
	descState   = prometheus.NewDesc("swift_device_port_state", "The device's port 1 state (1 for the current one).", []string{"device", "state"}, nil)
	descVerbs   = prometheus.NewDesc("swift_verbs_cache_state", "The node's verbs cache (1 for the current state: valid, stale, missing, invalid).", []string{"state"}, nil)
	descScrape  = prometheus.NewDesc("swift_scrape_errors", "Sources this scrape could not read (ledger, policy, zygote).", []string{"source"}, nil)
)

// NewCollector returns a Collector with its Create counters.
func NewCollector() *Collector {
	return &Collector{
		ProcRoot: "/proc",
		stalled:  map[string]bool{},
		read:     readPool,
		creates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "swift_create_total",
			Help: "Container Creates through the Swift shim, by outcome (left, injected, zygote, refused, failed) and, for refused and failed, the error's class.",
		}, []string{"outcome", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "swift_create_duration_seconds",
			Help:    "Time the Swift shim spent preparing a Create (before runc), by outcome.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"outcome"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "swift_create_reports_dropped_total",
			Help: "Create reports the agent did not count: not from root, malformed, truncated, unreadable.",
		}, []string{"why"}),
	}
}

// Observe counts a shim's Create report.
func (c *Collector) Observe(r Report) {
	c.creates.WithLabelValues(r.Outcome, r.Reason).Inc()
	c.latency.WithLabelValues(r.Outcome).Observe(r.Seconds)
}

// Drop counts a report that was not counted.
func (c *Collector) Drop(why string, err error) {
	c.dropped.WithLabelValues(why).Inc()
	log.L.WithError(err).WithField("why", why).Debug("swift-node: a create report dropped")
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeases, descUsage, descQuota, descLedger, descQPs, descLimit, descPeers, descPort, descState, descVerbs, descScrape} {
		ch <- d
	}
	c.creates.Describe(ch)
	c.latency.Describe(ch)
	c.dropped.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.creates.Collect(ch)
	c.latency.Collect(ch)
	c.dropped.Collect(ch)
	errs := map[string]float64{"ledger": 0, "policy": 0, "zygote": 0}
	defer func() {
		for _, s := range []string{"ledger", "policy", "zygote"} {
			ch <- prometheus.MustNewConstMetric(descScrape, prometheus.GaugeValue, errs[s], s)
		}
	}()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ctx := context.Background()
	if c.Devices != nil {
		for _, d := range c.Devices() {
			g(descPort, b2f(d.PortState == "ACTIVE"), d.Name)
			g(descState, 1, d.Name, d.PortState)
		}
	}
	if c.VerbsCache != nil {
		g(descVerbs, 1, c.VerbsCache())
	}
	leases, written, err := ledger.New(c.StateDir).Snapshot(ledgerWait)
	if err != nil {
		errs["ledger"]++
		log.G(ctx).WithError(err).Warn("swift-node: metrics: the ledger cannot be read")
		return
	}
	if !written.IsZero() {
		g(descLedger, float64(written.UnixNano())/1e9)
	}
	quotas := map[string]ledger.Amounts{}
	if c.Quotas != nil {
		q, err := c.Quotas()
		if err != nil {
			errs["policy"]++
			log.G(ctx).WithError(err).Warn("swift-node: metrics: the policy cannot be read: no quotas shown")
		} else {
			quotas = q
		}
	}
	used := ledger.Usage(leases)
	count := map[string]int{}
	for _, x := range leases {
		count[x.Tenant]++
	}
	for _, t := range ledger.Tenants(used, quotas) {
		g(descLeases, float64(count[t]), t)
		for _, r := range ledger.Resources {
			g(descUsage, float64(used[t].Get(r)), t, r)
			if q := quotas[t].Get(r); q > 0 {
				g(descQuota, float64(q), t, r)
			}
		}
	}
	selfNS := ledger.PIDNamespace(c.ProcRoot)
	for _, x := range leases {
		if !ledger.Alive(x) {
			continue
		}
		p, ok, err := c.readPool(selfNS, x)
		if err != nil {
			errs["zygote"]++
			log.G(ctx).WithError(err).Warn("swift-node: metrics: a zygote's figures left out")
			continue
		}
		if !ok {
			continue
		}
		podNS, pod := podOf(x.Bundle)
		labels := []string{x.Namespace, x.ID, x.Tenant, podNS, pod}
		if p.Rows != nil {
			for _, s := range RowStates {
				if s != "limit" {
					g(descQPs, float64(p.Rows[s]), append(labels, s)...)
				}
			}
		}
		// the limit the shim gave the zygote, its lease's charge (not
		// what a file the container can write says)
		g(descLimit, float64(x.Charge.QPs), labels...)
		for _, s := range PeerStates {
			g(descPeers, float64(p.Peers[s]), append(labels, s)...)
		}
	}
}

// readPool reads lease x's zygote figures (readPool) within
// poolReadTimeout. A read that does not end then is left to itself, and
// its container is not read again.
func (c *Collector) readPool(selfNS uint64, x ledger.Lease) (Pool, bool, error) {
	key := x.Key()
	if c.stalled[key] {
		return Pool{}, false, fmt.Errorf("container %s: its status read stalled before: not read again", key)
	}
	type result struct {
		p   Pool
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, ok, err := c.read(c.ProcRoot, selfNS, x)
		done <- result{p, ok, err}
	}()
	select {
	case r := <-done:
		return r.p, r.ok, r.err
	case <-time.After(poolReadTimeout):
		if len(c.stalled) > 4096 {
			clear(c.stalled)
		}
		c.stalled[key] = true
		return Pool{}, false, fmt.Errorf("container %s: its status read took more than %v: not read again", key, poolReadTimeout)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
