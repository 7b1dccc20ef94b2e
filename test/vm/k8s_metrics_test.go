//go:build e2e

package vm

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// K8sMetrics is the check of swift-node's metrics (after k8s-zygotes,
// whose trainer-0 it reads).
const K8sMetrics = "k8s-metrics"

// teamBPolicy is the bed's second tenant: one zygote container per node.
const teamBPolicy = `

# the metrics check's second tenant: one container per node
[tenants.team-b]
namespaces = ["team-b"]
devices = ["rxe0"]
peers = ["10.0.0.0/8:18515-18700"]
fork_sharing = true
[tenants.team-b.container]
qps = 16
memlock = "1Gi"
[tenants.team-b.node]
containers = 1
qps = 16
`

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

func parseSamples(text string) []sample {
	var out []sample
	for _, l := range strings.Split(text, "\n") {
		m := sampleLine.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[p[1]] = p[2]
		}
		out = append(out, s)
	}
	return out
}

// value is the sample of name whose labels include want ("" if none).
func value(ss []sample, name string, want map[string]string) string {
	for _, s := range ss {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
			}
		}
		if ok {
			return strconv.FormatFloat(s.value, 'f', -1, 64)
		}
	}
	return ""
}

// poolsListing is what the check reads of `swiftctl pools ls -o json`.
type poolsListing struct {
	Tenants []struct {
		Tenant string             `json:"tenant"`
		Usage  map[string]uint64  `json:"usage"`
		Quota  map[string]*uint64 `json:"quota"`
	} `json:"tenants"`
}

// metrics: swift-node on node a serves the node's figures. With zygote
// pods of two tenants on a (team-a's trainer-0, connected to trainer-1 on
// b, and team-b's meter-b), each tenant's leases, usage and quota are what
// `swiftctl pools ls -o json` says, and trainer-0's pool figures are what
// its zygote's status says; a Create refused by team-b's node quota counts
// under resource_exhausted. Then the agent is killed and left down:
// running pods go on, and a new zygote pod starts.
func (b *k8sBed) metrics(ctx context.Context) {
	c := K8sMetrics
	if out, err := b.onNode(NodeA, "dra_start", time.Minute); err != nil {
		b.fail(c, "swift-node on a: %v: %s", err, out)
		return
	}
	agentUp := true
	defer func() {
		if agentUp {
			b.onNode(NodeA, "dra_stop", time.Minute)
		}
	}()
	scrape := func() ([]sample, string, error) {
		out, err := b.onNode(NodeA, "wget -qO- http://127.0.0.1:9478/metrics", time.Minute)
		return parseSamples(out), out, err
	}
	if _, err := b.kubectl(ctx, "create", "namespace", "team-b"); err != nil {
		b.fail(c, "namespace team-b: %v", err)
		return
	}
	defer b.kubectl(ctx, "delete", "namespace", "team-b", "--wait=true", "--timeout=3m")
	teamB := func(name, port string) string {
		y := strings.Replace(zygotePod(name, NodeA, ""), "namespace: team-a", "namespace: team-b", 1)
		return strings.Replace(y, "    swift.io/zygote: \"true\"\n", "    swift.io/zygote: \"true\"\n    swift.io/listen: \""+port+"\"\n", 1)
	}
	running := func(ns, pod string) bool {
		if err := b.apply(ctx, teamB(pod, "18601")); err != nil {
			b.fail(c, "apply %s: %v", pod, err)
			return false
		}
		if err := b.waitRunning(ctx, ns, pod, 4*time.Minute); err != nil {
			b.fail(c, "%s Running: %v", pod, err)
			return false
		}
		return true
	}
	if !running("team-b", "meter-b") {
		return
	}
	// a second team-b container on a: over its node quota (1 container)
	if err := b.apply(ctx, teamB("meter-b2", "18602")); err != nil {
		b.fail(c, "apply meter-b2: %v", err)
		return
	}
	var ss []sample
	refused := map[string]string{"outcome": "refused", "reason": "resource_exhausted"}
	err := until(ctx, 3*time.Minute, func() (bool, error) {
		var err error
		ss, _, err = scrape()
		return err == nil && value(ss, "swift_create_total", refused) != "", err
	})
	b.fact(c, "refused", value(ss, "swift_create_total", refused))
	if err != nil {
		b.fail(c, "no refused Create counted: %v", err)
	}
	// the kubelet's event says why, in Swift's words
	var why string
	until(ctx, 2*time.Minute, func() (bool, error) {
		out, err := b.cp.Kubectl(ctx, "-n", "team-b", "get", "events", "--field-selector",
			"involvedObject.name=meter-b2,type=Warning", "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
		why = sub(out, `(tenant "team-b" is over its node-wide containers quota: limit 1, in use 1)`)
		return err == nil && why != "", fmt.Errorf("%v: %s", err, out)
	})
	b.kubectl(ctx, "-n", "team-b", "get", "events")
	b.fact(c, "meter-b2.why", why)
	b.kubectl(ctx, "-n", "team-b", "delete", "pod", "meter-b2", "--wait=true", "--timeout=2m")

	// the ledger's figures, the agent's and swiftctl's, and trainer-0's
	// pool, the zygote's and the agent's: read until two readings of the
	// status around a scrape agree (a function may be running)
	var text, status string
	err = until(ctx, 2*time.Minute, func() (bool, error) {
		st1, err := b.exec(ctx, "team-a", "trainer-0", "worker", "/.swift/bin/swift-run", "--status")
		if err != nil {
			return false, err
		}
		ss, text, err = scrape()
		if err != nil {
			return false, err
		}
		st2, err := b.exec(ctx, "team-a", "trainer-0", "worker", "/.swift/bin/swift-run", "--status")
		status = sub(st2, `(?m)^rows (.*)$`)
		return err == nil && st1 == st2 && status != "", err
	})
	if err != nil {
		b.fail(c, "trainer-0's status: %v", err)
	}
	b.fact(c, "trainer-0.rows", status)
	t0 := map[string]string{"pod": "trainer-0", "pod_namespace": "team-a", "tenant": "team-a", "namespace": "k8s.io"}
	var fromMetrics []string
	for _, s := range []string{"total", "free", "assigned", "held", "pending", "reclaim", "broken", "own"} {
		fromMetrics = append(fromMetrics, s+"="+value(ss, "swift_zygote_qps", with(t0, "state", s)))
	}
	fromMetrics = append(fromMetrics, "limit="+value(ss, "swift_zygote_qp_limit", t0))
	b.fact(c, "trainer-0.metrics", strings.Join(fromMetrics, " "))
	b.fact(c, "trainer-0.peers", "connected="+value(ss, "swift_zygote_peers", with(t0, "state", "connected"))+
		" waiting="+value(ss, "swift_zygote_peers", with(t0, "state", "waiting")))
	mb := map[string]string{"pod": "meter-b", "pod_namespace": "team-b", "tenant": "team-b"}
	b.fact(c, "meter-b.total", value(ss, "swift_zygote_qps", with(mb, "state", "total")))
	b.fact(c, "device.rxe0", value(ss, "swift_device_port_active", map[string]string{"device": "rxe0"}))
	b.fact(c, "created_zygote", value(ss, "swift_create_total", map[string]string{"outcome": "zygote"}))
	b.fact(c, "created_zygote_count", value(ss, "swift_create_duration_seconds_count", map[string]string{"outcome": "zygote"}))
	b.fact(c, "scrape_errors", value(ss, "swift_scrape_errors", map[string]string{"source": "ledger"})+" "+
		value(ss, "swift_scrape_errors", map[string]string{"source": "policy"})+" "+value(ss, "swift_scrape_errors", map[string]string{"source": "zygote"}))
	b.logf("%s: node a's metrics:\n%s", c, firstLines(text, `^swift_`))
	out, err := b.onNode(NodeA, "SWIFT_CONFIG=$W/swift.toml swiftctl pools ls -o json", time.Minute)
	var pl poolsListing
	if err == nil {
		err = json.Unmarshal([]byte(out), &pl)
	}
	if err != nil {
		b.fail(c, "swiftctl pools ls -o json: %v: %s", err, out)
		return
	}
	// each tenant with leases: every figure the same on both sides
	var verdicts []string
	for _, t := range pl.Tenants {
		if t.Usage["containers"] == 0 && value(ss, "swift_tenant_leases", map[string]string{"tenant": t.Tenant}) == "0" {
			continue
		}
		var bad []string
		if got := value(ss, "swift_tenant_leases", map[string]string{"tenant": t.Tenant}); got != strconv.FormatUint(t.Usage["containers"], 10) {
			bad = append(bad, fmt.Sprintf("leases %s, swiftctl %d", got, t.Usage["containers"]))
		}
		for r, u := range t.Usage {
			if got := value(ss, "swift_tenant_usage", map[string]string{"tenant": t.Tenant, "resource": r}); got != strconv.FormatUint(u, 10) {
				bad = append(bad, fmt.Sprintf("%s %s, swiftctl %d", r, got, u))
			}
			want := ""
			if q := t.Quota[r]; q != nil {
				want = strconv.FormatUint(*q, 10)
			}
			if got := value(ss, "swift_tenant_quota", map[string]string{"tenant": t.Tenant, "resource": r}); got != want {
				bad = append(bad, fmt.Sprintf("quota %s %q, swiftctl %q", r, got, want))
			}
		}
		v := t.Tenant + ":ok"
		if len(bad) > 0 {
			sort.Strings(bad)
			v = t.Tenant + ":" + strings.Join(bad, "; ")
		}
		verdicts = append(verdicts, v)
	}
	b.fact(c, "tenants", strings.Join(verdicts, " "))
	b.fact(c, "team-b.leases", value(ss, "swift_tenant_leases", map[string]string{"tenant": "team-b"}))

	// the agent killed and left down: what runs goes on, a new Create works
	if out, err := b.onNode(NodeA, "kill -9 $(cat $W/dra.pid) && sleep 1 && ! kill -0 $(cat $W/dra.pid) 2>/dev/null && rm -f $W/dra.pid && echo killed", time.Minute); err != nil || !strings.Contains(out, "killed") {
		b.fail(c, "kill swift-node: %v: %s", err, out)
		return
	}
	agentUp = false
	b.kubectl(ctx, "-n", "team-b", "delete", "pod", "meter-b", "--wait=true", "--timeout=2m")
	t1 := time.Now()
	if running("team-b", "meter-b3") {
		b.fact(c, "down.meter-b3", "Running")
		b.fact(c, "down.meter-b3_s", fmt.Sprintf("%.0f", time.Since(t1).Seconds()))
		st, _ := b.exec(ctx, "team-b", "meter-b3", "worker", "/.swift/bin/swift-run", "--status")
		b.fact(c, "down.meter-b3.zygote", sub(st, `(?m)^zygote \S+ tenant (\S+)`))
	}
	ph, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "trainer-0", "-o",
		`jsonpath={.status.phase} {.status.containerStatuses[?(@.name=="worker")].restartCount}`)
	b.fact(c, "down.trainer-0", strings.TrimSpace(ph))
	b.kubectl(ctx, "-n", "team-b", "delete", "pod", "meter-b3", "--wait=true", "--timeout=2m")
}

// with is m plus k=v.
func with(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for a, b := range m {
		out[a] = b
	}
	return out
}
