//go:build e2e

package vm

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swift-rdma/swift-containerd/test/harness"
)

// The k8s- checks: run on the host with kubectl, the only client, against
// the bed's control plane while the pair's guests are its nodes (x-k8s).
// Each check records facts; checkK8s asserts them after the boot.
const (
	K8sNodes     = "k8s-nodes"
	K8sRuntime   = "k8s-runtimeclass"
	K8sRefusal   = "k8s-refusal"
	K8sDevPlugin = "k8s-device-plugin"
	K8sDRA       = "k8s-dra"
	K8sZygotes   = "k8s-zygotes"
	K8sLifecycle = "k8s-lifecycle"
	K8sPodnet    = "k8s-podnet"
	K8sNodeconf  = "k8s-nodeconf"
	K8sPodStart  = "k8s-pod-start"
	k8sWorkerRef = "registry.example/rdma-worker:1.0"
)

// maxK8sRuns bounds the pod starts of each kind and the execs measured
// (a pod start takes seconds under emulation).
const maxK8sRuns = 10

// K8sChecks are the checks in run order.
var K8sChecks = []string{K8sNodes, K8sRuntime, K8sRefusal, K8sDevPlugin, K8sDRA, K8sZygotes, K8sMetrics, K8sLifecycle, K8sPodnet, K8sServerless, K8sNodeconf, K8sPodStart, K8sHelm}

type k8sBed struct {
	ctx    context.Context // cancelled when the guests are gone
	cp     *ControlPlane
	dir    string // the pair's shared dir's k8s/
	repo   string
	bin    string // the Swift binaries (swiftctl)
	runs   int    // pod starts of each kind
	mu     sync.Mutex
	facts  map[string]map[string]string
	errs   map[string][]string
	logw   *os.File
	reqSeq map[string]int
	only   map[string]bool // EnvK8sChecks; nil: every check
}

func (b *k8sBed) fact(check, k, v string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.facts[check] == nil {
		b.facts[check] = map[string]string{}
	}
	b.facts[check][k] = v
	fmt.Fprintf(b.logw, "[%s] fact %s=%s\n", check, k, v)
}

func (b *k8sBed) fail(check string, format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	msg := fmt.Sprintf(format, args...)
	b.errs[check] = append(b.errs[check], msg)
	fmt.Fprintf(b.logw, "[%s] FAIL %s\n", check, msg)
}

func (b *k8sBed) logf(format string, args ...any) {
	fmt.Fprintf(b.logw, "[%s] %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// kubectl runs kubectl as the admin, logging the call and its output.
func (b *k8sBed) kubectl(ctx context.Context, args ...string) (string, error) {
	out, err := b.cp.Kubectl(ctx, args...)
	b.logf("kubectl %s\n%s", strings.Join(args, " "), strings.TrimRight(out, "\n"))
	return out, err
}

func (b *k8sBed) apply(ctx context.Context, yaml string) error {
	out, err := b.cp.KubectlIn(ctx, yaml, "apply", "-f", "-")
	b.logf("kubectl apply -f - <<\n%s\n%s", yaml, out)
	return err
}

// onNode runs a shell fragment on a node (guest/k8s.sh serves it, with
// the scenario's functions and variables) and returns its output.
func (b *k8sBed) onNode(node, script string, within time.Duration) (string, error) {
	b.mu.Lock()
	b.reqSeq[node]++
	n := b.reqSeq[node]
	b.mu.Unlock()
	base := filepath.Join(b.dir, node, "cmd."+strconv.Itoa(n))
	if err := os.WriteFile(base+".tmp", []byte(script+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(base+".tmp", base); err != nil {
		return "", err
	}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && b.ctx.Err() == nil {
		if rc, err := os.ReadFile(base + ".rc"); err == nil {
			out, _ := os.ReadFile(base + ".out")
			b.logf("node %s: %s\n%s(rc %s)", node, script, out, strings.TrimSpace(string(rc)))
			if strings.TrimSpace(string(rc)) != "0" {
				return string(out), fmt.Errorf("on node %s, %q exited %s: %s", node, script, strings.TrimSpace(string(rc)), out)
			}
			return string(out), nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("node %s did not run %q within %s", node, script, within)
}

// until polls f every 500 ms until it says done or within passes.
func until(ctx context.Context, within time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ok, err := f()
		if ok {
			return nil
		}
		last = err
		time.Sleep(500 * time.Millisecond)
	}
	if last != nil {
		return fmt.Errorf("%w after %s: %v", ErrK8sTimeout, within, last)
	}
	return fmt.Errorf("%w after %s", ErrK8sTimeout, within)
}

// waitRunning waits until pod (namespace/name) is Running and Ready
// (every container started: a pod whose container failed to start may
// still be Running). Its error carries the pod's events.
func (b *k8sBed) waitRunning(ctx context.Context, ns, pod string, within time.Duration) error {
	err := until(ctx, within, func() (bool, error) {
		out, err := b.cp.Kubectl(ctx, "-n", ns, "get", "pod", pod, "-o",
			`jsonpath={.status.phase} {.status.conditions[?(@.type=="Ready")].status}`)
		if err != nil {
			return false, err
		}
		return strings.TrimSpace(out) == "Running True", fmt.Errorf("pod %s/%s is %q", ns, pod, strings.TrimSpace(out))
	})
	if err != nil {
		ev, _ := b.cp.Kubectl(ctx, "-n", ns, "get", "events", "--field-selector", "involvedObject.name="+pod)
		return fmt.Errorf("%w\nevents:\n%s", err, ev)
	}
	return nil
}

// start applies yaml and waits until pod (of team-a) is Running, recording
// a failure of check c otherwise.
func (b *k8sBed) start(ctx context.Context, c, yaml, pod string, within time.Duration) bool {
	if err := b.apply(ctx, yaml); err != nil {
		b.fail(c, "apply %s: %v", pod, err)
		return false
	}
	if err := b.waitRunning(ctx, "team-a", pod, within); err != nil {
		b.fail(c, "%s Running: %v", pod, err)
		return false
	}
	return true
}

// zygoteOf is the tenant and device of the zygote of pod (of team-a)'s
// worker container, as swift-run --status says once it answers.
func (b *k8sBed) zygoteOf(ctx context.Context, pod string) string {
	var st string
	until(ctx, time.Minute, func() (bool, error) {
		var err error
		st, err = b.exec(ctx, "team-a", pod, "worker", "/.swift/bin/swift-run", "--status")
		return err == nil && strings.HasPrefix(st, "zygote "), err
	})
	return sub(st, `(?m)^zygote \S+ tenant (\S+ device \S+)`)
}

// exec runs a command in a pod's container through the API server and the
// kubelet (kubectl exec).
func (b *k8sBed) exec(ctx context.Context, ns, pod, ctr string, cmd ...string) (string, error) {
	return b.kubectl(ctx, append([]string{"-n", ns, "exec", pod, "-c", ctr, "--"}, cmd...)...)
}

// nodeState is what a pod may leave behind on a node: Swift's leases,
// shims, zygotes, and mounts.
const nodeState = `echo "leases $(SWIFT_CONFIG=$W/swift.toml swiftctl pools ls --leases 2>/dev/null | grep -c '^k8s.io/')"
echo "shims $(ps -eo args | grep -c '[c]ontainerd-shim-swift-v2')"
echo "zygotes $(ps -eo args | grep -c '[s]wift-init')"
echo "mounts $(wc -l </proc/mounts)"`

func (b *k8sBed) nodeState(node string) (string, error) {
	out, err := b.onNode(node, nodeState, time.Minute)
	return strings.Join(strings.Split(strings.TrimSpace(out), "\n"), "; "), err
}

// run runs every check in order. A check that cannot go on records why and
// the later ones still run where they can.
func (b *k8sBed) run(ctx context.Context) {
	if !b.nodesReady(ctx) {
		return
	}
	for _, c := range []struct {
		name string
		run  func(context.Context)
	}{
		{K8sRuntime, b.runtimeClass}, {K8sRefusal, b.refusal}, {K8sDevPlugin, b.devicePlugin}, {K8sDRA, b.dra},
		{K8sZygotes, b.zygotes}, {K8sMetrics, b.metrics}, {K8sLifecycle, b.lifecycle}, {K8sPodnet, b.podnet},
		{K8sServerless, b.serverless}, {K8sNodeconf, b.nodeconf}, {K8sPodStart, b.podStart}, {K8sHelm, b.helmChart},
	} {
		if b.selected(c.name) {
			c.run(ctx)
		}
	}
	// the scenarios after this one get the nodes without the bed's pods
	b.kubectl(ctx, "-n", "default", "delete", "pod", "no-tenant", "--ignore-not-found", "--wait=true", "--timeout=2m")
	if _, err := b.kubectl(ctx, "delete", "namespace", "swift-system", "team-a", "--ignore-not-found",
		"--wait=true", "--timeout=4m"); err != nil {
		b.fail(K8sLifecycle, "delete the bed's namespaces: %v", err)
	}
}

// EnvK8sChecks, when set, names the k8s- checks to run (comma-separated;
// k8s-nodes and k8s-runtimeclass, which makes namespace team-a, always
// run, and k8s-zygotes gives the nodes the tenant's keys, which every
// zygote pair needs): for working on one check. The others are reported
// skipped, never passed; a check that counts on an earlier one's cleanup
// (k8s-podnet on k8s-lifecycle's) needs that one selected too.
const EnvK8sChecks = "SWIFT_K8S_CHECKS"

// selected tells whether check c runs.
func (b *k8sBed) selected(c string) bool {
	return c == K8sNodes || c == K8sRuntime || b.only == nil || b.only[c]
}

func (b *k8sBed) nodesReady(ctx context.Context) bool {
	c := K8sNodes
	// the cluster DNS's rights (CoreDNS runs on each node from its start)
	if err := b.apply(ctx, CoreDNSRBAC); err != nil {
		b.fail(c, "CoreDNS's RBAC: %v", err)
		return false
	}
	start := time.Now()
	ready := map[string]time.Duration{}
	err := until(ctx, 10*time.Minute, func() (bool, error) {
		out, err := b.cp.Kubectl(ctx, "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if err != nil {
			return false, err
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			if len(f) == 2 && f[1] == "True" {
				if _, ok := ready[f[0]]; !ok {
					ready[f[0]] = time.Since(start)
				}
			}
		}
		return len(ready) == 2, fmt.Errorf("nodes: %q", out)
	})
	out, _ := b.kubectl(ctx, "get", "nodes", "-o", "wide")
	b.fact(c, "get_nodes", strings.Join(strings.Fields(strings.ReplaceAll(out, "\n", " | ")), " "))
	if err != nil {
		b.fail(c, "both nodes Ready: %v", err)
		return false
	}
	for _, n := range []string{NodeA, NodeB} {
		v, _ := b.cp.Kubectl(ctx, "get", "node", n, "-o", "jsonpath={.status.nodeInfo.kubeletVersion}")
		b.fact(c, n+".version", strings.TrimSpace(v))
		// the runtime entry swiftctl install containerd made (guest/k8s.sh's
		// install_runtime), as containerd reports it to the kubelet
		h, _ := b.cp.Kubectl(ctx, "get", "node", n, "-o", "jsonpath={.status.runtimeHandlers[*].name}")
		hs := strings.Fields(h)
		sort.Strings(hs)
		b.fact(c, n+".runtime_handlers", strings.Join(hs, " "))
		if out, err := os.ReadFile(filepath.Join(b.dir, n, "install.out")); err == nil {
			b.fact(c, n+".install", firstLines(string(out), `^(create|add|restart) |^  (BinaryName|SwiftConfig|runtime_type) = `))
		}
		if out, err := os.ReadFile(filepath.Join(b.dir, n, "install-podnet.out")); err == nil {
			b.fact(c, n+".install_podnet", firstLines(string(out), `^(create|add|restart) |^  (SwiftConfig|runtime_type|cni_conf_dir) = `))
		}
		b.fact(c, n+".ready", "True")
		// from the kubelet's start on the node (its marker in the shared dir)
		if st, err := os.Stat(filepath.Join(b.dir, n+".started")); err == nil {
			b.fact(c, n+".ready_s", fmt.Sprintf("%.1f", start.Add(ready[n]).Sub(st.ModTime()).Seconds()))
		}
	}
	// the operator's steps: label the Swift nodes, apply the RuntimeClass
	if _, err := b.kubectl(ctx, "label", "node", NodeA, NodeB, "swift.io/runtime=true", "--overwrite"); err != nil {
		b.fail(c, "label nodes: %v", err)
		return false
	}
	return true
}

// example reads an example manifest with what stands for the operator's
// own in it replaced by the bed's (the device; the images are preloaded
// under their example names on the nodes).
func (b *k8sBed) example(name string) (string, error) {
	y, err := os.ReadFile(filepath.Join(b.repo, "examples", name))
	return strings.ReplaceAll(string(y), "mlx5_0", "rxe0"), err
}

// applyExample applies an example manifest (through edit, when not nil),
// or records why it could not under check c.
func (b *k8sBed) applyExample(ctx context.Context, c, name string, edit func(string) string) bool {
	y, err := b.example(name)
	if err == nil {
		if edit != nil {
			y = edit(y)
		}
		err = b.apply(ctx, y)
	}
	if err != nil {
		b.fail(c, "apply examples/%s: %v", name, err)
		return false
	}
	return true
}

// peerStatus waits up to 3 minutes until swift-run --status in pod (of
// team-a)'s container ctr shows its zygote connected to peer; it returns
// the last status seen.
func (b *k8sBed) peerStatus(ctx context.Context, pod, ctr, peer string) (string, error) {
	connected := regexp.MustCompile(`(?m)^peer ` + regexp.QuoteMeta(peer) + ` .* connected `)
	var st string
	err := until(ctx, 3*time.Minute, func() (bool, error) {
		var err error
		st, err = b.exec(ctx, "team-a", pod, ctr, "/.swift/bin/swift-run", "--status")
		return err == nil && connected.MatchString(st), err
	})
	return st, err
}

// pinned adds a nodeSelector for node to every Pod of a manifest (a pod
// whose peers are named by node address must run on that node).
func pinned(yaml, node string) string {
	docs := strings.Split(yaml, "\n---\n")
	for i, d := range docs {
		if regexp.MustCompile(`(?m)^kind: Pod$`).MatchString(d) {
			docs[i] = strings.Replace(d, "\nspec:\n", "\nspec:\n  nodeSelector: {kubernetes.io/hostname: "+node+"}\n", 1)
		}
	}
	return strings.Join(docs, "\n---\n")
}

func (b *k8sBed) runtimeClass(ctx context.Context) {
	c := K8sRuntime
	if !b.applyExample(ctx, c, "runtimeclass.yaml", func(y string) string { return pinned(y, NodeA) }) {
		return
	}
	if err := b.waitRunning(ctx, "team-a", "rdma-worker", 4*time.Minute); err != nil {
		b.fail(c, "rdma-worker Running: %v", err)
		return
	}
	rc, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "rdma-worker", "-o", "jsonpath={.spec.runtimeClassName} {.spec.nodeName}")
	b.fact(c, "swift.runtimeclass_node", strings.TrimSpace(rc))
	b.inside(ctx, c, "swift", "team-a", "rdma-worker", "worker")
	st, err := b.nodeState(NodeA)
	if err != nil {
		b.fail(c, "node a: %v", err)
	}
	b.fact(c, "swift.node_a", st)
	// the same image without the RuntimeClass: plain runc
	plain := `apiVersion: v1
kind: Pod
metadata:
  name: plain
  namespace: team-a
  annotations:
    swift.io/rdma: "true"
spec:
  nodeSelector: {kubernetes.io/hostname: a}
  hostNetwork: true
  containers:
    - name: worker
      image: ` + k8sWorkerRef + `
      command: ["/bin/worker"]
`
	if err := b.apply(ctx, plain); err != nil {
		b.fail(c, "apply the plain pod: %v", err)
		return
	}
	if err := b.waitRunning(ctx, "team-a", "plain", 3*time.Minute); err != nil {
		b.fail(c, "plain Running: %v", err)
		return
	}
	b.inside(ctx, c, "plain", "team-a", "plain", "worker")
	if _, err := b.kubectl(ctx, "-n", "team-a", "delete", "pod", "plain", "--wait=true", "--timeout=3m"); err != nil {
		b.fail(c, "delete plain: %v", err)
	}
}

// inside records, from inside a pod's container, what Swift gave it: the
// uverbs devices, RLIMIT_MEMLOCK, the rdma cgroup's limits and the
// devices it names in SWIFT_RDMA_DEVICES.
func (b *k8sBed) inside(ctx context.Context, c, key, ns, pod, ctr string) {
	out, err := b.exec(ctx, ns, pod, ctr, "/bin/sh", "-c",
		`echo "uverbs $(ls /dev/infiniband 2>/dev/null | grep -c '^uverbs')"; echo "memlock $(ulimit -l)"; `+
			`echo "rdma_max $(cat /sys/fs/cgroup/rdma.max 2>/dev/null | tr '\n' ' ')"; `+
			`echo "devices_env $SWIFT_RDMA_DEVICES"`)
	if err != nil {
		b.fail(c, "exec in %s/%s: %v", ns, pod, err)
		return
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, " ")
		b.fact(c, key+"."+k, strings.Join(strings.Fields(v), " "))
	}
}

// refusal: pods the node refuses (no tenant for the namespace, a bad
// annotation) do not start, say why in their events in Swift's own words,
// and leave nothing on the node.
func (b *k8sBed) refusal(ctx context.Context) {
	c := K8sRefusal
	// settled: the plain pod's sandbox may still be going
	var before, prev string
	err := until(ctx, time.Minute, func() (bool, error) {
		var err error
		prev = before
		before, err = b.nodeState(NodeA)
		return err == nil && before == prev, err
	})
	if err != nil {
		b.fail(c, "node a: %v", err)
		return
	}
	b.fact(c, "before", before)
	pods := []struct{ ns, name, ann string }{
		{"default", "no-tenant", `swift.io/rdma: "true"`},
		{"team-a", "bad-pool", "swift.io/rdma: \"true\"\n    swift.io/zygote: \"true\"\n    swift.io/pool: \"100000\""},
	}
	for _, p := range pods {
		y := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  annotations:
    %s
spec:
  runtimeClassName: swift
  nodeSelector: {kubernetes.io/hostname: a}
  hostNetwork: true
  restartPolicy: Never
  containers:
    - name: worker
      image: %s
      command: ["/bin/worker"]
`, p.name, p.ns, p.ann, k8sWorkerRef)
		if err := b.apply(ctx, y); err != nil {
			b.fail(c, "apply %s: %v", p.name, err)
			return
		}
	}
	for _, p := range pods {
		var msg string
		err := until(ctx, 3*time.Minute, func() (bool, error) {
			out, err := b.cp.Kubectl(ctx, "-n", p.ns, "get", "events", "--field-selector",
				"involvedObject.name="+p.name+",type=Warning", "-o", "jsonpath={range .items[*]}{.reason}: {.message}{\"\\n\"}{end}")
			msg = strings.TrimSpace(out)
			// the sandbox's or the container's creation failed
			return err == nil && regexp.MustCompile(`(?m)^(Failed|FailedCreatePodSandBox): `).MatchString(msg), err
		})
		b.kubectl(ctx, "-n", p.ns, "describe", "pod", p.name)
		if err != nil {
			b.fail(c, "no Warning event of %s/%s says it failed: %v (events: %s)", p.ns, p.name, err, msg)
		}
		b.fact(c, p.name+".events", strings.ReplaceAll(msg, "\n", " | "))
		phase, _ := b.cp.Kubectl(ctx, "-n", p.ns, "get", "pod", p.name, "-o", "jsonpath={.status.phase}")
		b.fact(c, p.name+".phase", strings.TrimSpace(phase))
	}
	for _, p := range pods {
		if _, err := b.kubectl(ctx, "-n", p.ns, "delete", "pod", p.name, "--wait=true", "--timeout=3m"); err != nil {
			b.fail(c, "delete %s: %v", p.name, err)
		}
	}
	// the kubelet stops a sandbox it gave up on asynchronously
	var after string
	until(ctx, time.Minute, func() (bool, error) {
		after, err = b.nodeState(NodeA)
		return err == nil && after == before, err
	})
	b.fact(c, "after", after)
}

// devicePlugin: node a gets a second device, rxe1, and a real device
// plugin (the generic device plugin, guest/k8s.sh's dp_start) advertises
// rxe1's uverbs node and rdma_cm as swift.io/rdma-rxe1, count 1. A zygote
// pod that requests it is scheduled there and gets exactly that device
// through the kubelet's DeviceSpecs, which Swift honours and configures
// (a pod without the request gets both devices team-a may use); a second
// such pod, and one bound to node b, stay Pending as Kubernetes keeps
// them; the second runs once the first is gone.
func (b *k8sBed) devicePlugin(ctx context.Context) {
	c := K8sDevPlugin
	out, err := b.onNode(NodeA, "dp_start", time.Minute)
	if err != nil {
		b.fail(c, "start the device plugin: %v", err)
		return
	}
	b.fact(c, "started", strings.TrimSpace(out))
	defer b.onNode(NodeA, "dp_stop", time.Minute)
	alloc := func(n string) string {
		out, _ := b.cp.Kubectl(ctx, "get", "node", n, "-o", `jsonpath={.status.allocatable.swift\.io/rdma-rxe1}`)
		return strings.TrimSpace(out)
	}
	err = until(ctx, 2*time.Minute, func() (bool, error) { return alloc(NodeA) == "1", nil })
	b.fact(c, "a.allocatable", alloc(NodeA))
	b.fact(c, "b.allocatable", alloc(NodeB))
	if err != nil {
		b.fail(c, "node a never offered swift.io/rdma-rxe1: %v", err)
		return
	}
	pod := func(name, node string) string {
		return zygotePod(name, node, "      resources:\n        limits:\n          swift.io/rdma-rxe1: 1\n")
	}
	if !b.start(ctx, c, pod("dp-0", ""), "dp-0", 3*time.Minute) {
		return
	}
	n, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "dp-0", "-o", "jsonpath={.spec.nodeName}")
	b.fact(c, "dp-0.node", strings.TrimSpace(n))
	b.inside(ctx, c, "dp-0", "team-a", "dp-0", "worker")
	b.fact(c, "dp-0.zygote", b.zygoteOf(ctx, "dp-0"))
	// the same pod without the request: every device team-a may use
	none := strings.Replace(strings.Replace(pod("dp-none", NodeA), "      resources:\n        limits:\n          swift.io/rdma-rxe1: 1\n", "", 1),
		"    swift.io/zygote: \"true\"\n", "", 1)
	if !b.start(ctx, c, none, "dp-none", 3*time.Minute) {
		return
	}
	b.inside(ctx, c, "dp-none", "team-a", "dp-none", "worker")
	b.kubectl(ctx, "-n", "team-a", "delete", "pod", "dp-none", "--wait=true", "--timeout=2m")
	// beyond the count, and on a node without the resource: Pending
	if err := b.apply(ctx, pod("dp-1", "")+"---\n"+pod("dp-b", NodeB)); err != nil {
		b.fail(c, "apply dp-1, dp-b: %v", err)
		return
	}
	for _, p := range []string{"dp-1", "dp-b"} {
		var msg string
		until(ctx, 2*time.Minute, func() (bool, error) {
			out, err := b.cp.Kubectl(ctx, "-n", "team-a", "get", "events", "--field-selector",
				"involvedObject.name="+p+",reason=FailedScheduling", "-o", "jsonpath={.items[*].message}")
			msg = strings.TrimSpace(out)
			return err == nil && msg != "", err
		})
		b.fact(c, p+".scheduling", msg)
		ph, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", p, "-o", "jsonpath={.status.phase}")
		b.fact(c, p+".phase", strings.TrimSpace(ph))
	}
	st0, _ := b.nodeState(NodeA)
	b.fact(c, "node_a", st0)
	if _, err := b.kubectl(ctx, "-n", "team-a", "delete", "pod", "dp-0", "--wait=true", "--timeout=2m"); err != nil {
		b.fail(c, "delete dp-0: %v", err)
	}
	if err := b.waitRunning(ctx, "team-a", "dp-1", 3*time.Minute); err != nil {
		b.fail(c, "dp-1 once dp-0 is gone: %v", err)
	}
	ph, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "dp-1", "-o", "jsonpath={.status.phase} {.spec.nodeName}")
	b.fact(c, "dp-1.after", strings.TrimSpace(ph))
	b.kubectl(ctx, "-n", "team-a", "delete", "pod", "dp-1", "dp-b", "--wait=true", "--timeout=2m")
}

// dra: Swift's node agent, swift-node (its DRA driver rdma.swift.io),
// runs on both nodes; node a has rxe1 beside rxe0. The ResourceSlices list
// each node's devices with their attributes; examples/dra/claim.yaml's pod
// (pinned to node b) is allocated b's rxe0 by the real scheduler, prepared
// as its CDI name, and Swift configures exactly it. A claim selecting by
// attribute (netdev k8sdp0) gets rxe1, and its zygote pod lands on a; a
// second such claim stays Pending. The link under rxe1 going down shows as
// the slice's portState and as Unhealthy in the pod's status, and healthy
// again once it is back up. A restart of the agent loses nothing: the pod
// runs on, and once it is deleted the second claim's pod gets rxe1.
func (b *k8sBed) dra(ctx context.Context) {
	c := K8sDRA
	defer b.onNode(NodeA, "dra_stop; rxe1_stop", time.Minute)
	out, err := b.onNode(NodeA, "rxe1_start && dra_start", time.Minute)
	if err != nil {
		b.fail(c, "start swift-node on a: %v", err)
		return
	}
	b.fact(c, "a.started", strings.Join(strings.Fields(out), " "))
	defer b.onNode(NodeB, "dra_stop", time.Minute)
	if _, err := b.onNode(NodeB, "dra_start", time.Minute); err != nil {
		b.fail(c, "start swift-node on b: %v", err)
		return
	}
	// the slices: pool (node) and device names, and rxe1's attributes
	slices := func() string {
		out, _ := b.cp.Kubectl(ctx, "get", "resourceslices", "-o",
			`jsonpath={range .items[?(@.spec.driver=="rdma.swift.io")]}{.spec.pool.name}:{.spec.nodeName}:{range .spec.devices[*]}{.name},{end}{"\n"}{end}`)
		l := strings.Fields(out)
		sort.Strings(l)
		return strings.Join(l, " ")
	}
	attr := func(node, dev, a string) string {
		out, _ := b.cp.Kubectl(ctx, "get", "resourceslices", "-o", fmt.Sprintf(
			`jsonpath={range .items[?(@.spec.nodeName=="%s")]}{.spec.devices[?(@.name=="%s")].attributes.%s}{end}`, node, dev, a))
		return strings.TrimSpace(out)
	}
	err = until(ctx, 2*time.Minute, func() (bool, error) { return slices() == "a:a:rxe0,rxe1, b:b:rxe0,", nil })
	b.fact(c, "slices", slices())
	if err != nil {
		b.fail(c, "both nodes' ResourceSlices: %v", err)
		return
	}
	for _, a := range []string{"name", "netdev", "linkLayer", "portState", "softRoCE", "forkSharing"} {
		b.fact(c, "rxe1."+a, attr(NodeA, "rxe1", a))
	}
	out, _ = b.kubectl(ctx, "get", "resourceslices", "-o", "wide")
	b.fact(c, "get_resourceslices", strings.Join(strings.Fields(strings.ReplaceAll(out, "\n", " | ")), " "))
	// the example, its pod pinned to node b
	y, err := b.example("dra/claim.yaml")
	if err == nil {
		err = b.apply(ctx, pinned(y, NodeB))
	}
	if err != nil {
		b.fail(c, "apply examples/dra/claim.yaml: %v", err)
		return
	}
	// a claim's allocation: driver, pool, device
	alloc := func(claim string) string {
		out, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "resourceclaim", claim, "-o",
			"jsonpath={range .status.allocation.devices.results[*]}{.driver} {.pool} {.device}{end}")
		return strings.TrimSpace(out)
	}
	if err := b.waitRunning(ctx, "team-a", "worker-dra", 3*time.Minute); err != nil {
		b.fail(c, "worker-dra Running: %v", err)
	} else {
		// the claim the template made for the pod
		claim, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "worker-dra", "-o", "jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}")
		b.fact(c, "worker-dra.allocation", alloc(strings.TrimSpace(claim)))
		b.inside(ctx, c, "worker-dra", "team-a", "worker-dra", "worker")
	}
	// a claim selecting by attribute: the device on netdev k8sdp0
	claim := func(name string) string {
		return fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: %s
  namespace: team-a
spec:
  devices:
    requests:
      - name: nic
        exactly:
          deviceClassName: swift-rdma
          selectors:
            - cel:
                expression: device.attributes["rdma.swift.io"].netdev == "k8sdp0"
`, name)
	}
	uses := func(claim string) string {
		return "      resources:\n        claims:\n          - name: nic\n  resourceClaims:\n    - name: nic\n      resourceClaimName: " + claim + "\n"
	}
	if !b.start(ctx, c, claim("rxe1-0")+"---\n"+zygotePod("dra-0", "", uses("rxe1-0")), "dra-0", 3*time.Minute) {
		return
	}
	n, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "dra-0", "-o", "jsonpath={.spec.nodeName}")
	b.fact(c, "dra-0.node", strings.TrimSpace(n))
	b.fact(c, "dra-0.allocation", alloc("rxe1-0"))
	b.inside(ctx, c, "dra-0", "team-a", "dra-0", "worker")
	b.fact(c, "dra-0.zygote", b.zygoteOf(ctx, "dra-0"))
	// a second claim of the same device: Pending
	if err := b.apply(ctx, claim("rxe1-1")+"---\n"+zygotePod("dra-1", "", uses("rxe1-1"))); err != nil {
		b.fail(c, "apply dra-1: %v", err)
		return
	}
	var msg string
	until(ctx, 2*time.Minute, func() (bool, error) {
		out, err := b.cp.Kubectl(ctx, "-n", "team-a", "get", "events", "--field-selector",
			"involvedObject.name=dra-1,reason=FailedScheduling", "-o", "jsonpath={.items[*].message}")
		msg = strings.TrimSpace(out)
		return err == nil && msg != "", err
	})
	b.fact(c, "dra-1.scheduling", msg)
	ph, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "dra-1", "-o", "jsonpath={.status.phase}")
	b.fact(c, "dra-1.phase", strings.TrimSpace(ph))
	// health: the link under rxe1 goes down, then up again
	health := func() string {
		out, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "dra-0", "-o",
			`jsonpath={range .status.containerStatuses[*].allocatedResourcesStatus[*]}{.name} {range .resources[*]}{.resourceID} {.health}{end}{end}`)
		return strings.TrimSpace(out)
	}
	for _, step := range []struct{ link, state, health string }{
		{"", "ACTIVE", "Healthy"}, {"down", "DOWN", "Unhealthy"}, {"up", "ACTIVE", "Healthy"},
	} {
		key := "link_" + step.link
		if step.link == "" {
			key = "link_initial"
		} else if _, err := b.onNode(NodeA, "ip link set k8sdp0 "+step.link, time.Minute); err != nil {
			b.fail(c, "link %s: %v", step.link, err)
			return
		}
		start := time.Now()
		want := "claim:nic swift.io/rdma=rxe1 " + step.health
		err := until(ctx, 2*time.Minute, func() (bool, error) {
			return attr(NodeA, "rxe1", "portState") == `{"string":"`+step.state+`"}` && health() == want, nil
		})
		b.fact(c, key+".port_state", attr(NodeA, "rxe1", "portState"))
		b.fact(c, key+".health", health())
		if err == nil && step.link != "" {
			b.fact(c, key+".seen_s", fmt.Sprintf("%.1f", time.Since(start).Seconds()))
		}
	}
	// those changes came from the kernel's netlink events: swift-node
	// rescans only every hour here (guest/k8s.sh)
	out, _ = b.onNode(NodeA, `grep -c 'after="netlink event"' "$R/swift-node.log"`, time.Minute)
	b.fact(c, "republished_after_event", strings.TrimSpace(out))
	out, _ = b.onNode(NodeA, `grep -c 'after=rescan' "$R/swift-node.log"`, time.Minute)
	b.fact(c, "republished_after_rescan", strings.TrimSpace(out))
	// the agent restarts: nothing is lost
	if _, err := b.onNode(NodeA, "dra_stop && dra_start", time.Minute); err != nil {
		b.fail(c, "restart swift-node on a: %v", err)
	}
	ph, _ = b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "dra-0", "-o", `jsonpath={.status.phase} {.status.containerStatuses[0].restartCount}`)
	b.fact(c, "dra-0.after_agent_restart", strings.TrimSpace(ph)+" "+b.zygoteOf(ctx, "dra-0"))
	st, _ := b.nodeState(NodeA)
	b.fact(c, "node_a", st)
	if _, err := b.kubectl(ctx, "-n", "team-a", "delete", "pod", "dra-0", "--wait=true", "--timeout=2m"); err != nil {
		b.fail(c, "delete dra-0: %v", err)
	}
	b.kubectl(ctx, "-n", "team-a", "delete", "resourceclaim", "rxe1-0", "--wait=true", "--timeout=2m")
	if err := b.waitRunning(ctx, "team-a", "dra-1", 3*time.Minute); err != nil {
		b.fail(c, "dra-1 once dra-0 and its claim are gone: %v", err)
	}
	ph, _ = b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "dra-1", "-o", "jsonpath={.status.phase} {.spec.nodeName}")
	b.fact(c, "dra-1.after", strings.TrimSpace(ph)+" "+alloc("rxe1-1"))
	b.kubectl(ctx, "-n", "team-a", "delete", "pod", "dra-1", "worker-dra", "--wait=true", "--timeout=2m")
	b.kubectl(ctx, "-n", "team-a", "delete", "resourceclaim", "rxe1-1", "--wait=true", "--timeout=2m")
	if out, err := b.cp.KubectlIn(ctx, y, "delete", "-f", "-", "--ignore-not-found", "--wait=true", "--timeout=2m"); err != nil {
		b.fail(c, "delete examples/dra/claim.yaml: %v: %s", err, out)
	}
	for _, nd := range []string{NodeA, NodeB} {
		st, _ := b.nodeState(nd)
		b.fact(c, nd+".after_delete", sub(st, `^(leases \d+; shims \d+; zygotes \d+)`))
	}
}

// zygotePod is a host-network zygote pod of team-a (on node, if given),
// its container's resources as given (YAML at the container's indent).
func zygotePod(name, node, resources string) string {
	sel := ""
	if node != "" {
		sel = "  nodeSelector: {kubernetes.io/hostname: " + node + "}\n"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: team-a
  annotations:
    swift.io/rdma: "true"
    swift.io/zygote: "true"
spec:
  runtimeClassName: swift
%s  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
    - name: worker
      image: %s
      command: ["/bin/worker"]
%s`, name, sel, k8sWorkerRef, resources)
}

// zygotes: the tenant keyring reaches both nodes through the example
// DaemonSet; trainer-0 (examples/k8s/zygote-pod.yaml) on node a and its
// peer trainer-1 on node b pre-connect, and a function forked in trainer-0
// passes 1,000 checksummed messages to one in trainer-1.
func (b *k8sBed) zygotes(ctx context.Context) {
	c := K8sZygotes
	keys := filepath.Join(b.dir, "team-a.keys")
	if out, err := exec.CommandContext(ctx, filepath.Join(b.bin, "swiftctl"), "keys", "gen", "--id", "2026-12", keys).CombinedOutput(); err != nil {
		b.fail(c, "swiftctl keys gen: %v: %s", err, out)
		return
	}
	if !b.applyExample(ctx, c, "k8s/tenant-keys.yaml", nil) {
		return
	}
	secret, err := b.kubectl(ctx, "-n", "swift-system", "create", "secret", "generic", "swift-tenant-keys",
		"--from-file="+keys, "--dry-run=client", "-o", "yaml")
	if err == nil {
		err = b.apply(ctx, secret)
	}
	if err != nil {
		b.fail(c, "the keys Secret: %v", err)
		return
	}
	for _, n := range []string{NodeA, NodeB} {
		err := until(ctx, 4*time.Minute, func() (bool, error) {
			out, err := b.onNode(n, "stat -c '%a %u' /etc/swift/keys/team-a.keys", 30*time.Second)
			return err == nil, fmt.Errorf("%v %s", err, out)
		})
		if err != nil {
			ds, _ := b.kubectl(ctx, "-n", "swift-system", "get", "pods", "-o", "wide")
			b.fail(c, "the keyring on node %s: %v\n%s", n, err, ds)
			return
		}
		out, _ := b.onNode(n, "stat -c '%a %u' /etc/swift/keys/team-a.keys; cmp /etc/swift/keys/team-a.keys $K8S/team-a.keys && echo same", 30*time.Second)
		b.fact(c, n+".keys", strings.Join(strings.Fields(out), " "))
	}
	t0, err := b.example("k8s/zygote-pod.yaml")
	if err != nil {
		b.fail(c, "%v", err)
		return
	}
	// trainer-1, as the example's comment has it: trainer-0 with 0 and 1
	// swapped. trainer-0 is pinned to node a (the lifecycle check restarts
	// a's kubelet); the scheduler places trainer-1, and the anti-affinity
	// keeps it off a.
	t1 := strings.NewReplacer("trainer-0", "trainer-1", "trainer-1", "trainer-0").Replace(t0)
	for _, y := range []string{pinned(t0, NodeA), t1} {
		if err := b.apply(ctx, y); err != nil {
			b.fail(c, "apply a trainer: %v", err)
			return
		}
	}
	var nodes []string
	for _, p := range []string{"trainer-0", "trainer-1"} {
		if err := b.waitRunning(ctx, "team-a", p, 4*time.Minute); err != nil {
			b.fail(c, "%s Running: %v", p, err)
			return
		}
		n, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", p, "-o", "jsonpath={.spec.nodeName}")
		nodes = append(nodes, p+" "+strings.TrimSpace(n))
	}
	b.fact(c, "nodes", strings.Join(nodes, ", "))
	// the headless Service's names, as the cluster DNS answers them
	ep, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "endpointslices", "-l", "kubernetes.io/service-name=trainer", "-o",
		`jsonpath={range .items[*].endpoints[*]}{.hostname}={.addresses[0]} {end}`)
	eps := strings.Fields(ep)
	sort.Strings(eps)
	b.fact(c, "endpoints", strings.Join(eps, " "))
	// the sidecar: the pod's devices, its own command, no zygote
	sc, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "trainer-0", "-o",
		`jsonpath={.status.containerStatuses[?(@.name=="log-shipper")].restartCount} {.status.containerStatuses[?(@.name=="log-shipper")].ready}`)
	b.fact(c, "sidecar.state", strings.TrimSpace(sc))
	b.inside(ctx, c, "sidecar", "team-a", "trainer-0", "log-shipper")
	st, err := b.peerStatus(ctx, "trainer-0", "worker", "trainer-1-worker.team-a")
	b.fact(c, "status", firstLines(st, `^(zygote|peer) `))
	if err != nil {
		b.fail(c, "trainer-0's zygote never connected to trainer-1's: %v", err)
		return
	}
	b.messages(ctx, c, "trainer-0", "trainer-1")
	// the price of invoking a function through exec, end to end
	// (k8s.exec_swift_run_ms)
	var ms []float64
	for i := 0; i < b.runs; i++ {
		t0 := time.Now()
		if _, err := b.exec(ctx, "team-a", "trainer-0", "worker", "/.swift/bin/swift-run", "--", "noop"); err != nil {
			b.fail(c, "swift-run -- noop: %v", err)
			return
		}
		ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
	}
	b.fact(c, "exec_swift_run_ms", fmt.Sprintf("%.0f", harness.Median(ms)))
	b.fact(c, "exec_swift_run_n", strconv.Itoa(len(ms)))
}

// messages has an echo function in pod to (of team-a, container worker)
// hold its QPs to from's zygote, and a function forked in from pass 1,000
// checksummed messages of 256 B to it: facts pingpong_verified, rtt_us and
// echo of check c.
func (b *k8sBed) messages(ctx context.Context, c, from, to string) {
	echo := make(chan string, 1)
	go func() {
		out, _ := b.exec(ctx, "team-a", to, "worker", "/.swift/bin/swift-run", "--peer", from+"-worker", "--all", "--", "echo", "20000")
		echo <- out
	}()
	// the echo function holds to's QPs to from
	peer := regexp.MustCompile(`(?m)^peer ` + regexp.QuoteMeta(from) + `-worker\.team-a .* assigned [1-9]`)
	until(ctx, time.Minute, func() (bool, error) {
		st, err := b.cp.Kubectl(ctx, "-n", "team-a", "exec", to, "-c", "worker", "--", "/.swift/bin/swift-run", "--status")
		return peer.MatchString(st), err
	})
	out, err := b.exec(ctx, "team-a", from, "worker", "/.swift/bin/swift-run", "--peer", to+"-worker", "--time", "--",
		"pingpong", "1000", "256")
	if err != nil {
		b.fail(c, "pingpong: %v", err)
	}
	b.fact(c, "pingpong_verified", sub(out, `(?m)^pingpong: sent [0-9]*, verified ([0-9]*),`))
	b.fact(c, "rtt_us", sub(out, `rtt median ([0-9.]*) us`))
	select {
	case e := <-echo:
		b.fact(c, "echo", sub(e, `(?m)^(echo: [0-9]* messages)`))
	case <-time.After(2 * time.Minute):
		b.fail(c, "%s's echo function did not end", to)
	}
}

// lifecycle: a kubelet restart keeps running pods' zygotes, pools and
// leases; deleting the pods releases the leases and leaves no shim,
// zygote or mount.
func (b *k8sBed) lifecycle(ctx context.Context) {
	c := K8sLifecycle
	// the container (its ID) and its zygote's pool
	zyg := func() string {
		id, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "trainer-0", "-o",
			`jsonpath={.status.containerStatuses[?(@.name=="worker")].containerID}`)
		st, _ := b.cp.Kubectl(ctx, "-n", "team-a", "exec", "trainer-0", "-c", "worker", "--", "/.swift/bin/swift-run", "--status")
		return strings.TrimSpace(id) + " | " + firstLines(st, `^(zygote|peer) `)
	}
	before := zyg()
	stBefore, _ := b.nodeState(NodeA)
	if _, err := b.onNode(NodeA, "kubelet_stop; kubelet_start", 2*time.Minute); err != nil {
		b.fail(c, "restart node a's kubelet: %v", err)
		return
	}
	// Ready again: its heartbeat after the restart
	t0 := time.Now().UTC().Truncate(time.Second)
	err := until(ctx, 4*time.Minute, func() (bool, error) {
		out, err := b.cp.Kubectl(ctx, "get", "node", NodeA, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].lastHeartbeatTime} {.status.conditions[?(@.type=="Ready")].status}`)
		f := strings.Fields(out)
		if err != nil || len(f) != 2 {
			return false, err
		}
		hb, perr := time.Parse(time.RFC3339, f[0])
		return perr == nil && !hb.Before(t0) && f[1] == "True", fmt.Errorf("%s", out)
	})
	if err != nil {
		b.fail(c, "node a Ready after the kubelet restart: %v", err)
	}
	// exec reaches the restarted kubelet a moment after its heartbeat
	var after string
	until(ctx, time.Minute, func() (bool, error) {
		after = zyg()
		return strings.Contains(after, "connected"), nil
	})
	stAfter, _ := b.nodeState(NodeA)
	b.fact(c, "zygote_kept", strconv.FormatBool(strings.Contains(before, "connected") && before == after))
	b.fact(c, "zygote_before", before)
	b.fact(c, "zygote_after", after)
	// Swift's part (the kubelet mounts one more thing when it starts)
	swift := func(st string) string { return strings.Split(st, "; mounts")[0] }
	b.fact(c, "node_kept", strconv.FormatBool(stBefore != "" && swift(stBefore) == swift(stAfter)))
	b.fact(c, "node_before_restart", stBefore)
	b.containerRestart(ctx)
	// what names the pods on their nodes: their UIDs (the kubelet's
	// volumes) and their containers' IDs (rootfs mounts, shims)
	var ids []string
	for _, p := range []string{"trainer-0", "trainer-1", "rdma-worker"} {
		out, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", p, "-o",
			`jsonpath={.metadata.uid} {range .status.containerStatuses[*]}{.containerID} {.lastState.terminated.containerID} {end}`)
		for _, id := range strings.Fields(out) {
			ids = append(ids, strings.TrimPrefix(id, "containerd://"))
		}
	}
	for _, p := range []string{"trainer-0", "trainer-1", "rdma-worker"} {
		if _, err := b.kubectl(ctx, "-n", "team-a", "delete", "pod", p, "--wait=true", "--timeout=3m"); err != nil {
			b.fail(c, "delete %s: %v", p, err)
		}
	}
	// three pods' UIDs, five containers, and trainer-1's first worker
	if len(ids) != 9 {
		b.fail(c, "the pods' UIDs and container IDs: %q", ids)
		return
	}
	left := "echo \"mounts $(grep -c -F -e " + strings.Join(ids, " -e ") + " /proc/mounts)\"; " +
		"echo \"processes $(ps -eo args | grep -F -e " + strings.Join(ids, " -e ") + " | grep -vc -e grep)\"; " +
		"echo \"pod_dirs $(ls /var/lib/kubelet/pods | grep -c -F -e " + strings.Join(ids, " -e ") + ")\""
	for _, n := range []string{NodeA, NodeB} {
		var st, rest string
		until(ctx, time.Minute, func() (bool, error) {
			var err error
			st, err = b.nodeState(n)
			if err != nil {
				return false, err
			}
			out, err := b.onNode(n, left, time.Minute)
			rest = strings.Join(strings.Split(strings.TrimSpace(out), "\n"), "; ")
			return err == nil && strings.HasPrefix(st, "leases 0; shims 0; zygotes 0;") &&
				rest == "mounts 0; processes 0; pod_dirs 0", err
		})
		b.fact(c, n+".after_delete", swift(st)+"; "+rest)
	}
}

// podnetLinks lists a node's RDMA links by name.
const podnetLinks = `rdma link show | awk '{print $2}' | cut -d/ -f1 | sort | tr '\n' ' '`

// podnet: zygote pods on their own networks (examples/k8s/podnet.yaml).
// The RuntimeClass swift-podnet's runtime entry (a second swiftctl install
// containerd, guest/k8s.sh) puts its pods on a macvlan of the link with
// the node config that gives each its own soft-RoCE device; rank-0 on a
// and rank-1 on b find each other by the headless Service's DNS names
// (their pods' own addresses), pre-connect, and a function passes 1,000
// checksummed messages. The node agent does not publish a pod's device,
// and deleting the pods leaves the nodes' RDMA links as they were.
func (b *k8sBed) podnet(ctx context.Context) {
	c := K8sPodnet
	before := map[string]string{}
	for _, n := range []string{NodeA, NodeB} {
		out, err := b.onNode(n, podnetLinks, time.Minute)
		if err != nil {
			b.fail(c, "node %s's RDMA links: %v", n, err)
			return
		}
		before[n] = strings.TrimSpace(out)
		b.fact(c, n+".links_before", before[n])
	}
	// the operator's step 4: the nodes with the swift-podnet entry
	if _, err := b.kubectl(ctx, "label", "node", NodeA, NodeB, "swift.io/podnet=true", "--overwrite"); err != nil {
		b.fail(c, "label nodes: %v", err)
		return
	}
	r0, err := b.example("k8s/podnet.yaml")
	if err != nil {
		b.fail(c, "%v", err)
		return
	}
	// rank-1, as the example's comment has it: rank-0 with 0 and 1 swapped;
	// rank-0 is pinned to a, the anti-affinity keeps rank-1 off it
	r1 := strings.NewReplacer("rank-0", "rank-1", "rank-1", "rank-0").Replace(r0)
	for _, y := range []string{pinned(r0, NodeA), r1} {
		if err := b.apply(ctx, y); err != nil {
			b.fail(c, "apply a rank: %v", err)
			return
		}
	}
	var nodes, ips []string
	for _, p := range []string{"rank-0", "rank-1"} {
		if err := b.waitRunning(ctx, "team-a", p, 4*time.Minute); err != nil {
			b.fail(c, "%s Running: %v", p, err)
			return
		}
		out, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", p, "-o", "jsonpath={.spec.nodeName} {.status.podIP}")
		f := strings.Fields(out)
		if len(f) != 2 {
			b.fail(c, "%s's node and address: %q", p, out)
			return
		}
		nodes = append(nodes, p+" "+f[0])
		ips = append(ips, p+"="+f[1])
	}
	b.fact(c, "nodes", strings.Join(nodes, ", "))
	b.fact(c, "pod_ips", strings.Join(ips, " "))
	ep, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "endpointslices", "-l", "kubernetes.io/service-name=ranks", "-o",
		`jsonpath={range .items[*].endpoints[*]}{.hostname}={.addresses[0]} {end}`)
	eps := strings.Fields(ep)
	sort.Strings(eps)
	b.fact(c, "endpoints", strings.Join(eps, " "))
	// inside rank-0: its address, its own device (named after its network
	// namespace), that device's node alone, and the device's GID for its
	// address
	b.inside(ctx, c, "rank-0", "team-a", "rank-0", "worker")
	out, err := b.exec(ctx, "team-a", "rank-0", "worker", "/bin/sh", "-c",
		`a=$(ip -4 -o addr show | awk '$2 != "lo" {sub("/.*", "", $4); print $4; exit}'); `+
			`g=$(echo "$a" | awk -F. '{printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", $1, $2, $3, $4}'); `+
			`echo "addr $a"; echo "netns $(readlink /proc/self/ns/net)"; `+
			`echo "gid_of_addr $(cat /sys/class/infiniband/$SWIFT_RDMA_DEVICES/ports/1/gids/* 2>/dev/null | grep -cx "$g")"`)
	if err != nil {
		b.fail(c, "exec in rank-0: %v: %s", err, out)
	}
	b.fact(c, "rank-0.addr", sub(out, `(?m)^addr (.*)$`))
	b.fact(c, "rank-0.gid_of_addr", sub(out, `(?m)^gid_of_addr (.*)$`))
	ns := sub(out, `(?m)^netns net:\[([0-9]+)\]$`)
	b.mu.Lock()
	dev := b.facts[c]["rank-0.devices_env"]
	b.mu.Unlock()
	b.fact(c, "rank-0.dev_of_netns", strconv.FormatBool(ns != "" && dev == "swp"+ns))
	st, err := b.peerStatus(ctx, "rank-0", "worker", "rank-1-worker.team-a")
	b.fact(c, "status", firstLines(st, `^(zygote|peer) `))
	b.fact(c, "rank-0.zygote_device", sub(st, `(?m)^zygote \S+ tenant \S+ device (\S+)`))
	if err != nil {
		b.fail(c, "rank-0's zygote never connected to rank-1's: %v", err)
		return
	}
	// the node agent, started while the pod's device exists, does not
	// offer it
	if out, err := b.onNode(NodeA, "dra_start", time.Minute); err != nil {
		b.fail(c, "swift-node on a: %v: %s", err, out)
	} else {
		var sl string
		until(ctx, time.Minute, func() (bool, error) {
			sl, err = b.cp.Kubectl(ctx, "get", "resourceslices", "--field-selector", "spec.nodeName="+NodeA, "-o",
				`jsonpath={range .items[*]}{.spec.driver}:{range .spec.devices[*]}{.name},{end}{"\n"}{end}`)
			// its slice once it has scanned the node (the one swift-node
			// left in step 5 lists rxe1 too)
			return err == nil && strings.TrimSpace(sl) == "rdma.swift.io:rxe0,", fmt.Errorf("slices %q", sl)
		})
		b.fact(c, "a.slice", strings.TrimSpace(sl))
		b.onNode(NodeA, "dra_stop", time.Minute)
	}
	b.messages(ctx, c, "rank-0", "rank-1")
	during, _ := b.onNode(NodeA, podnetLinks, time.Minute)
	b.fact(c, "a.links_during", strings.TrimSpace(during))
	for _, p := range []string{"rank-0", "rank-1"} {
		if _, err := b.kubectl(ctx, "-n", "team-a", "delete", "pod", p, "--wait=true", "--timeout=3m"); err != nil {
			b.fail(c, "delete %s: %v", p, err)
		}
	}
	for _, n := range []string{NodeA, NodeB} {
		var links, st string
		until(ctx, time.Minute, func() (bool, error) {
			out, err := b.onNode(n, podnetLinks, time.Minute)
			links = strings.TrimSpace(out)
			if err == nil {
				st, err = b.nodeState(n)
			}
			return err == nil && links == before[n] && strings.HasPrefix(st, "leases 0; shims 0; zygotes 0;"), err
		})
		b.fact(c, n+".links_after", links)
		b.fact(c, n+".after_delete", strings.Split(st, "; mounts")[0])
	}
}

// nodeconf: swift-node installs the tenant policy and keyrings from
// Kubernetes (examples/k8s/node-agent-rbac.yaml): it replaces the keys
// DaemonSet; a policy change in the ConfigMap reaches both nodes and the
// next Create follows it; a malformed policy changes nothing; a ring
// added to the Secret reaches both nodes, and is removed from both once it
// leaves the Secret. The original policy is restored at the end.
func (b *k8sBed) nodeconf(ctx context.Context) {
	c := K8sNodeconf
	nodes := []string{NodeA, NodeB}
	if !b.applyExample(ctx, c, "k8s/node-agent-rbac.yaml", nil) {
		return
	}
	if _, err := b.kubectl(ctx, "-n", "swift-system", "delete", "daemonset", "swift-tenant-keys", "--ignore-not-found", "--wait=true", "--timeout=2m"); err != nil {
		b.fail(c, "delete the keys DaemonSet: %v", err)
	}
	orig, err := os.ReadFile(filepath.Join(b.dir, "policy.toml"))
	if err != nil {
		b.fail(c, "the bed's policy: %v", err)
		return
	}
	// team-a's container memlock, 1Gi in the example, becomes 2Gi
	changed := strings.Replace(string(orig), `memlock = "1Gi"`, `memlock = "2Gi"`, 1)
	policyCM := func(policy string) error {
		f := filepath.Join(b.dir, "policy-cm.toml")
		if err := os.WriteFile(f, []byte(policy), 0o644); err != nil {
			return err
		}
		y, err := b.kubectl(ctx, "-n", "swift-system", "create", "configmap", "swift-policy", "--from-file=policy.toml="+f,
			"--dry-run=client", "-o", "yaml")
		if err == nil {
			err = b.apply(ctx, y)
		}
		return err
	}
	keysSecret := func(rings ...string) error {
		args := []string{"-n", "swift-system", "create", "secret", "generic", "swift-tenant-keys"}
		for _, r := range rings {
			args = append(args, "--from-file="+filepath.Join(b.dir, r))
		}
		y, err := b.kubectl(ctx, append(args, "--dry-run=client", "-o", "yaml")...)
		if err == nil {
			err = b.apply(ctx, y)
		}
		return err
	}
	ring := filepath.Join(b.dir, "team-c.keys")
	if out, err := exec.CommandContext(ctx, filepath.Join(b.bin, "swiftctl"), "keys", "gen", "--id", "2026-12", ring).CombinedOutput(); err != nil {
		b.fail(c, "swiftctl keys gen: %v: %s", err, out)
		return
	}
	if err := policyCM(changed); err != nil {
		b.fail(c, "the policy ConfigMap: %v", err)
		return
	}
	if err := keysSecret("team-a.keys", "team-c.keys"); err != nil {
		b.fail(c, "the keys Secret: %v", err)
		return
	}
	for _, n := range nodes {
		if out, err := b.onNode(n, "dra_start --policy-configmap swift-system/swift-policy --keys-secret swift-system/swift-tenant-keys", time.Minute); err != nil {
			b.fail(c, "swift-node on %s: %v: %s", n, err, out)
			return
		}
	}
	defer func() {
		for _, n := range nodes {
			b.onNode(n, "dra_stop", time.Minute)
		}
	}()
	// what a node holds: team-a's container memlock in its policy, and the
	// rings (mode, owner) in its keys dir
	state := `echo "memlock $(grep -o 'memlock = "[0-9]*Gi"' "$W/policy.toml" | head -n1)"; ` +
		`echo "rings $(cd /etc/swift/keys && stat -c '%n:%a:%u' *.keys | sort | tr '\n' ' ')"`
	wait := func(key, want string) {
		var got string
		start := time.Now()
		for _, n := range nodes {
			err := until(ctx, 2*time.Minute, func() (bool, error) {
				out, err := b.onNode(n, state, time.Minute)
				got = strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(out), "\n", "; ")), " ")
				return err == nil && got == want, fmt.Errorf("%v: %s", err, got)
			})
			b.fact(c, n+"."+key, got)
			if err != nil {
				b.fail(c, "%s on node %s: %v", key, n, err)
			}
		}
		b.fact(c, key+"_s", fmt.Sprintf("%.1f", time.Since(start).Seconds()))
	}
	wait("installed", `memlock memlock = "2Gi"; rings team-a.keys:400:0 team-c.keys:400:0`)
	// the next Create follows the new policy
	pod := strings.Replace(zygotePod("nodeconf", NodeA, ""), "    swift.io/zygote: \"true\"\n", "", 1)
	if b.start(ctx, c, pod, "nodeconf", 4*time.Minute) {
		b.inside(ctx, c, "nodeconf", "team-a", "nodeconf", "worker")
		b.kubectl(ctx, "-n", "team-a", "delete", "pod", "nodeconf", "--wait=true", "--timeout=2m")
	}
	// a malformed policy changes nothing, and the agent says why
	if err := policyCM("[tenants\n"); err != nil {
		b.fail(c, "the malformed policy: %v", err)
	}
	var said string
	until(ctx, time.Minute, func() (bool, error) {
		out, err := b.onNode(NodeA, `grep -c 'tenant policy not installed' "$R/swift-node.log"`, time.Minute)
		said = strings.TrimSpace(out)
		return err == nil && said != "0", err
	})
	b.fact(c, "malformed_logged", said)
	// team-c leaves the Secret: gone from both nodes (the policy still 2Gi)
	if err := keysSecret("team-a.keys"); err != nil {
		b.fail(c, "the keys Secret without team-c: %v", err)
	}
	wait("removed", `memlock memlock = "2Gi"; rings team-a.keys:400:0`)
	// the original policy back, for the checks after this one
	if err := policyCM(string(orig)); err != nil {
		b.fail(c, "restore the policy: %v", err)
	}
	wait("restored", `memlock memlock = "1Gi"; rings team-a.keys:400:0`)
}

// containerRestart: trainer-1's zygote container ends (SIGTERM to its
// PID 1, the zygote); the kubelet restarts it by the pod's restart policy,
// and the new zygote reconnects to trainer-0's.
func (b *k8sBed) containerRestart(ctx context.Context) {
	c := K8sLifecycle
	if _, err := b.exec(ctx, "team-a", "trainer-1", "worker", "/bin/kill", "-TERM", "1"); err != nil {
		b.logf("kill -TERM 1 in trainer-1: %v (the exec may end with its container)", err)
	}
	restarts := func() string {
		out, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", "trainer-1", "-o",
			`jsonpath={.status.containerStatuses[?(@.name=="worker")].restartCount} {.status.containerStatuses[?(@.name=="worker")].ready}`)
		return strings.TrimSpace(out)
	}
	err := until(ctx, 3*time.Minute, func() (bool, error) { return restarts() == "1 true", nil })
	b.fact(c, "restarted", restarts())
	if err != nil {
		b.fail(c, "trainer-1's worker was not restarted: %v", err)
		return
	}
	for _, p := range []struct{ pod, peer string }{{"trainer-1", "trainer-0"}, {"trainer-0", "trainer-1"}} {
		var st string
		until(ctx, 3*time.Minute, func() (bool, error) {
			st, _ = b.cp.Kubectl(ctx, "-n", "team-a", "exec", p.pod, "-c", "worker", "--", "/.swift/bin/swift-run", "--status")
			return regexp.MustCompile(`(?m)^peer ` + p.peer + `-worker\.team-a \S+ connected `).MatchString(st), nil
		})
		b.fact(c, p.pod+".after_restart", firstLines(st, `^peer `))
	}
}

// podStart: a pod created until it is Running, RuntimeClass swift against
// runc, alternating, on node a (k8s.pod_start_ms).
func (b *k8sBed) podStart(ctx context.Context) {
	c := K8sPodStart
	// the nodes' memory (KiB: total, available) with the bed's agents and
	// no pods of the checks left
	for _, n := range []string{NodeA, NodeB} {
		out, _ := b.onNode(n, `awk '/^MemTotal|^MemAvailable/ {printf "%s ", $2}' /proc/meminfo`, time.Minute)
		b.fact(c, n+".mem_kib", strings.TrimSpace(out))
	}
	var ms = map[string][]float64{}
	for i := 0; i < b.runs; i++ {
		for _, kind := range []string{"runc", "swift"} {
			name := fmt.Sprintf("start-%s-%d", kind, i)
			rc, ann := "", ""
			if kind == "swift" {
				rc = "  runtimeClassName: swift\n"
				ann = "  annotations: {swift.io/rdma: \"true\"}\n"
			}
			y := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n  namespace: team-a\n%sspec:\n%s"+
				"  nodeSelector: {kubernetes.io/hostname: a}\n  hostNetwork: true\n  terminationGracePeriodSeconds: 1\n"+
				"  containers:\n    - name: worker\n      image: %s\n      command: [\"/bin/worker\"]\n", name, ann, rc, k8sWorkerRef)
			t0 := time.Now()
			if err := b.apply(ctx, y); err != nil {
				b.fail(c, "apply %s: %v", name, err)
				return
			}
			if err := b.waitRunning(ctx, "team-a", name, 3*time.Minute); err != nil {
				b.fail(c, "%s Running: %v", name, err)
				return
			}
			ms[kind] = append(ms[kind], float64(time.Since(t0).Microseconds())/1000)
			b.kubectl(ctx, "-n", "team-a", "delete", "pod", name, "--wait=true", "--timeout=2m")
		}
	}
	for k, v := range ms {
		b.fact(c, "pod_start_ms."+k, fmt.Sprintf("%.0f", harness.Median(v)))
		b.fact(c, "pod_start_ms."+k+"_n", strconv.Itoa(len(v)))
	}
	if len(ms["runc"]) > 0 && len(ms["swift"]) > 0 {
		b.fact(c, "pod_start_ratio", fmt.Sprintf("%.2f", harness.Median(ms["swift"])/harness.Median(ms["runc"])))
	}
}

func sub(s, re string) string {
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if len(m) < 2 {
		return ""
	}
	return m[1]
}

func firstLines(s, re string) string {
	r := regexp.MustCompile(re)
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if r.MatchString(l) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, " | ")
}

// checkK8s asserts the k8s- checks' facts.
func checkK8s(t *testing.T, b *k8sBed) {
	for _, c := range K8sChecks {
		t.Run(c, func(t *testing.T) {
			if !b.selected(c) {
				t.Skipf("not run: $%s=%q", EnvK8sChecks, os.Getenv(EnvK8sChecks))
			}
			b.mu.Lock()
			f, errs := b.facts[c], b.errs[c]
			b.mu.Unlock()
			for _, e := range errs {
				t.Error(e)
			}
			want := func(k, v string) {
				t.Helper()
				if f[k] != v {
					t.Errorf("%s: %s = %q, want %q", c, k, f[k], v)
				}
			}
			match := func(k, re string) {
				t.Helper()
				if !regexp.MustCompile(re).MatchString(f[k]) {
					t.Errorf("%s: %s = %q, want it to match %s", c, k, f[k], re)
				}
			}
			switch c {
			case K8sNodes:
				for _, n := range []string{NodeA, NodeB} {
					want(n+".version", K8sVersion)
					want(n+".ready", "True")
					want(n+".runtime_handlers", "runc swift swift-podnet")
					match(n+".install", `^create drop-in: /run/swiftvm/conf\.d/swift\.toml \| `+
						`add "/run/swiftvm/conf\.d/\*\.toml" to imports: /run/swiftvm/containerd\.toml \| `+
						`restart containerd to apply .* \| `+
						`runtime_type = "io\.containerd\.swift\.v2" \| BinaryName = "/\S+/runc" \| SwiftConfig = "/run/swiftvm/swift\.toml"$`)
					// the second entry: the same import, its own node config and CNI directory
					match(n+".install_podnet", `^create drop-in: /run/swiftvm/conf\.d/swift-podnet\.toml \| restart containerd to apply .* \| `+
						`runtime_type = "io\.containerd\.swift\.v2" \| cni_conf_dir = "/run/swiftvm/cni/podnet\.d" \| SwiftConfig = "/run/swiftvm/swift-podnet\.toml"$`)
				}
			case K8sRuntime:
				want("swift.runtimeclass_node", "swift a")
				want("swift.uverbs", "1")
				want("swift.memlock", "1048576") // team-a's 1Gi, in KiB
				want("swift.rdma_max", "rxe0 hca_handle=4 hca_object=512")
				want("swift.devices_env", "rxe0")
				match("swift.node_a", `^leases 1; shims 1; zygotes 0; mounts [0-9]+$`)
				want("plain.uverbs", "0")
				want("plain.memlock", "8192") // the node's default
				want("plain.rdma_max", "rxe0 hca_handle=max hca_object=max")
				want("plain.devices_env", "")
			case K8sRefusal:
				match("no-tenant.events", `"default" is not mapped to any tenant in /run/swiftvm/policy\.toml`)
				match("bad-pool.events", `swift\.io/pool="100000": want a whole number of QPs per peer from 1 to 256`)
				want("no-tenant.phase", "Pending")
				want("bad-pool.phase", "Pending")
				if f["after"] == "" || f["after"] != f["before"] {
					t.Errorf("the refused pods left something on node a: before %q, after %q", f["before"], f["after"])
				}
			case K8sDevPlugin:
				want("a.allocatable", "1")
				want("b.allocatable", "")
				want("dp-0.node", NodeA)
				want("dp-0.uverbs", "1")
				want("dp-0.devices_env", "rxe1")
				want("dp-0.memlock", "1048576")
				// rxe0: not the pod's (no device node), no limit set
				want("dp-0.rdma_max", "rxe0 hca_handle=max hca_object=max rxe1 hca_handle=4 hca_object=512")
				want("dp-0.zygote", "team-a device rxe1")
				want("dp-none.uverbs", "2")
				want("dp-none.devices_env", "rxe0,rxe1")
				want("dp-none.rdma_max", "rxe0 hca_handle=4 hca_object=512 rxe1 hca_handle=4 hca_object=512")
				match("dp-1.scheduling", `Insufficient swift\.io/rdma-rxe1`)
				want("dp-1.phase", "Pending")
				match("dp-b.scheduling", `Insufficient swift\.io/rdma-rxe1`)
				want("dp-b.phase", "Pending")
				match("node_a", `^leases 2; shims 2; zygotes 1; `) // dp-0 and rdma-worker
				want("dp-1.after", "Running a")
			case K8sDRA:
				want("slices", "a:a:rxe0,rxe1, b:b:rxe0,")
				want("rxe1.name", `{"string":"rxe1"}`)
				want("rxe1.netdev", `{"string":"k8sdp0"}`)
				want("rxe1.linkLayer", `{"string":"Ethernet"}`)
				want("rxe1.portState", `{"string":"ACTIVE"}`)
				want("rxe1.softRoCE", `{"bool":true}`)
				want("rxe1.forkSharing", `{"string":"relay"}`)
				want("worker-dra.allocation", "rdma.swift.io b rxe0")
				want("worker-dra.uverbs", "1")
				want("worker-dra.devices_env", "rxe0")
				want("worker-dra.memlock", "1048576")
				want("worker-dra.rdma_max", "rxe0 hca_handle=4 hca_object=512")
				want("dra-0.node", NodeA)
				want("dra-0.allocation", "rdma.swift.io a rxe1")
				want("dra-0.uverbs", "1")
				want("dra-0.devices_env", "rxe1")
				want("dra-0.rdma_max", "rxe0 hca_handle=max hca_object=max rxe1 hca_handle=4 hca_object=512")
				want("dra-0.zygote", "team-a device rxe1")
				match("dra-1.scheduling", `cannot allocate all claims`)
				want("dra-1.phase", "Pending")
				for _, st := range []struct{ k, state, health string }{
					{"link_initial", "ACTIVE", "Healthy"}, {"link_down", "DOWN", "Unhealthy"}, {"link_up", "ACTIVE", "Healthy"},
				} {
					want(st.k+".port_state", `{"string":"`+st.state+`"}`)
					want(st.k+".health", "claim:nic swift.io/rdma=rxe1 "+st.health)
				}
				// by the netlink events, the rescan being hourly: at least one
				// republish each for down and up, and none after a rescan
				match("link_down.seen_s", `^[0-9]\.[0-9]$|^1[0-9]\.[0-9]$`)
				match("link_up.seen_s", `^[0-9]\.[0-9]$|^1[0-9]\.[0-9]$`)
				match("republished_after_event", `^([2-9]|[1-9][0-9]+)$`)
				want("republished_after_rescan", "0")
				want("dra-0.after_agent_restart", "Running 0 team-a device rxe1")
				match("node_a", `^leases 2; shims 2; zygotes 1; `) // dra-0 and rdma-worker (worker-dra is on b, dra-1 Pending)
				want("dra-1.after", "Running a rdma.swift.io a rxe1")
				want("a.after_delete", "leases 1; shims 1; zygotes 0")
				want("b.after_delete", "leases 0; shims 0; zygotes 0")
			case K8sZygotes:
				want("sidecar.state", "0 true")
				want("sidecar.uverbs", "1")
				want("sidecar.devices_env", "rxe0")
				want("a.keys", "400 0 same")
				want("b.keys", "400 0 same")
				want("nodes", "trainer-0 a, trainer-1 b")
				want("endpoints", "trainer-0="+NodeAIP+" trainer-1="+NodeBIP)
				// the peer as the example names it: its DNS name
				match("status", `peer trainer-1-worker\.team-a trainer-1\.trainer\.team-a\.svc\.cluster\.local:18515 connected`)
				want("pingpong_verified", "1000")
				want("echo", "echo: 1000 messages")
				want("exec_swift_run_n", strconv.Itoa(b.runs))
				match("exec_swift_run_ms", `^[1-9][0-9]*$`)
			case K8sMetrics:
				match("refused", `^[1-9][0-9]*$`)
				want("meter-b2.why", `tenant "team-b" is over its node-wide containers quota: limit 1, in use 1`)
				match("trainer-0.rows", `^total=[1-9][0-9]* free=[0-9]+ assigned=[0-9]+ held=[0-9]+ pending=[0-9]+ reclaim=[0-9]+ broken=[0-9]+ own=[0-9]+ limit=[1-9][0-9]*$`)
				want("trainer-0.metrics", f["trainer-0.rows"])
				want("trainer-0.peers", "connected=1 waiting=0")
				want("meter-b.total", "0")
				want("device.rxe0", "1")
				match("created_zygote", `^[1-9][0-9]*$`)
				want("created_zygote_count", f["created_zygote"])
				want("scrape_errors", "0 0 0")
				want("tenants", "team-a:ok team-b:ok")
				want("team-b.leases", "1")
				want("down.meter-b3", "Running")
				want("down.meter-b3.zygote", "team-b")
				want("down.trainer-0", "Running 0")
			case K8sLifecycle:
				want("zygote_kept", "true")
				want("node_kept", "true")
				want("restarted", "1 true")
				match("trainer-1.after_restart", `^peer trainer-0-worker\.team-a \S+ connected `)
				match("trainer-0.after_restart", `^peer trainer-1-worker\.team-a \S+ connected `)
				for _, n := range []string{NodeA, NodeB} {
					want(n+".after_delete", "leases 0; shims 0; zygotes 0; mounts 0; processes 0; pod_dirs 0")
				}
			case K8sPodnet:
				want("nodes", "rank-0 a, rank-1 b")
				// each node's own range of the link's subnet (guest/k8s.sh)
				match("pod_ips", `^rank-0=10\.0\.3\.11[1-9] rank-1=10\.0\.3\.12[1-9]$`)
				want("endpoints", f["pod_ips"])
				want("rank-0.addr", strings.TrimPrefix(strings.Fields(f["pod_ips"] + " ")[0], "rank-0="))
				want("rank-0.uverbs", "1")
				match("rank-0.devices_env", `^swp[0-9]+$`)
				want("rank-0.dev_of_netns", "true")
				want("rank-0.gid_of_addr", "1")
				want("rank-0.zygote_device", f["rank-0.devices_env"])
				want("rank-0.memlock", "1048576")
				match("rank-0.rdma_max", `(^| )swp[0-9]+ hca_handle=4 hca_object=512( |$)`)
				// the peer as the example names it: its DNS name, which is its pod's address
				match("status", `peer rank-1-worker\.team-a rank-1\.ranks\.team-a\.svc\.cluster\.local:18515 connected`)
				want("pingpong_verified", "1000")
				want("echo", "echo: 1000 messages")
				want("a.slice", "rdma.swift.io:rxe0,")
				match("a.links_during", `(^| )swp[0-9]+( |$)`)
				for _, n := range []string{NodeA, NodeB} {
					want(n+".links_after", f[n+".links_before"])
					match(n+".links_before", `^rxe0$`)
					want(n+".after_delete", "leases 0; shims 0; zygotes 0")
				}
			case K8sNodeconf:
				for _, n := range []string{NodeA, NodeB} {
					want(n+".installed", `memlock memlock = "2Gi"; rings team-a.keys:400:0 team-c.keys:400:0`)
					want(n+".removed", `memlock memlock = "2Gi"; rings team-a.keys:400:0`)
					want(n+".restored", `memlock memlock = "1Gi"; rings team-a.keys:400:0`)
				}
				want("nodeconf.memlock", "2097152") // the ConfigMap's 2Gi, in KiB
				match("malformed_logged", `^[1-9][0-9]*$`)
				for _, k := range []string{"installed_s", "removed_s", "restored_s"} {
					match(k, `^[0-9]+\.[0-9]$`)
				}
			case K8sHelm:
				for _, n := range []string{NodeA, NodeB} {
					match(n+".image", `^docker\.io/swift-rdma/swift:[0-9.]+$`)
				}
				match("installed_s", `^[0-9]+$`)
				want("agents_ready", "2/2")
				want("runtimeclass", `swift {"swift.io/runtime":"true"}`)
				want("slices", "a:rxe0/ACTIVE/relay b:rxe0/ACTIVE/relay")
				want("forge.own_node", "true")
				want("forge.other_node", "the agent of node 'a' may not write the ResourceSlices of node 'b'")
				want("allocated", "rdma.swift.io/b/rxe0")
				want("worker-helm.uverbs", "1")
				want("worker-helm.devices_env", "rxe0")
				want("b.metrics_leases", `swift_tenant_leases{tenant="team-a"} 1`)
				want("left_after_uninstall", "")
				// the installer DaemonSet
				want("installers_ready", "2/2")
				want("labels", "a=true b=true")
				for _, n := range []string{NodeA, NodeB} {
					// the bed's entries out: containerd's config without any, conf.d empty
					match(n+".before", `^[0-9a-f]{64}$`)
					// one run that did it all, or (its container lost to
					// containerd's restart) a run that did it all or was
					// stopped midway, then the replacement's run: nothing
					// left to do, or the rest
					full := `installed in [0-9hms.]+: [1-9][0-9]* files written, containerd config changed true, restarted true, labelled true`
					nothing := `installed in [0-9hms.]+: 0 files written, containerd config changed false, restarted false, labelled false`
					rest := `installed in [0-9hms.]+: [0-9]+ files written, containerd config changed (true|false), restarted (true|false), labelled (true|false)`
					match(n+".installer", `^(`+full+`|`+full+` then `+nothing+`|stopped while installing then `+rest+`)$`)
					match(n+".installer_restarts", `^[0-9]+$`)
					want(n+".entry", `runtime_path = "`+helmPrefix+`/bin/containerd-shim-swift-v2" SwiftConfig = "/run/swiftvm/swift-helm.toml" 1 `+
						`containerd-shim-swift-v2 swift-hook swiftctl -rwxr-xr-x root`)
					match(n+".runtime_handlers", `(^| )swift( |$)`)
					want(n+".restored", "true")
					want(n+".left", "0")
				}
				want("forge_label.own", "true")
				want("forge_label.other_node", "the installer of node 'a' may not change node 'b'")
				want("forge_label.other_label", "the installer may change only the node label swift.io/runtime")
				match("b.installed_shims", `^[1-9][0-9]*$`)
				match("uninstalled_s", `^[0-9]+$`)
				want("labels_after_uninstall", "a= b=")
				want("uninstallers", "13 files removed, containerd config changed true, restarted true, label removed true; "+
					"13 files removed, containerd config changed true, restarted true, label removed true")
			case K8sServerless:
				checkServerless(want, match)
			case K8sPodStart:
				for _, k := range []string{"runc", "swift"} {
					want("pod_start_ms."+k+"_n", strconv.Itoa(b.runs))
					match("pod_start_ms."+k, `^[1-9][0-9]*$`)
				}
				match("pod_start_ratio", `^[0-9]+\.[0-9]+$`)
			}
		})
	}
	if out := os.Getenv("SWIFT_BENCH_OUT"); out != "" && !t.Failed() {
		num := func(c, k string) float64 {
			v, _ := strconv.ParseFloat(b.facts[c][k], 64)
			return v
		}
		res := map[string]any{
			"k8s.runs":               b.runs,
			"k8s.pod_start_ms.runc":  num(K8sPodStart, "pod_start_ms.runc"),
			"k8s.pod_start_ms.swift": num(K8sPodStart, "pod_start_ms.swift"),
			"k8s.pod_start_ratio":    num(K8sPodStart, "pod_start_ratio"),
			"k8s.exec_swift_run_ms":  num(K8sZygotes, "exec_swift_run_ms"),
			// a function invoked over HTTP (one call at a time) and through
			// kubectl exec, in the OpenWhisk-style action pod
			"k8s.invoke.http_us":        num(K8sServerless, "ow.seq_median_us"),
			"k8s.invoke.exec_us":        num(K8sServerless, "ow.exec_ms") * 1000,
			"k8s.invoke.exec_over_http": num(K8sServerless, "ow.exec_ms") * 1000 / max(1, num(K8sServerless, "ow.seq_median_us")),
			"k8s.ready_s.a":             num(K8sNodes, "a.ready_s"),
			"k8s.ready_s.b":             num(K8sNodes, "b.ready_s"),
		}
		t.Logf("k8s: %v", res)
		if err := mergeJSON(out, res); err != nil {
			t.Errorf("write %s: %v", out, err)
		}
	}
}

// startK8s starts the bed's control plane for a pair booted in dir (its
// node files in dir/shared/k8s) and the checks, which wait for the nodes'
// kubelets. stop ends the checks (when the guests are gone) and the
// control plane, and returns the bed for checkK8s.
func startK8s(t *testing.T, ctx context.Context, cfg Config, dir string) (fwd map[string]int, stop func() *k8sBed) {
	t.Helper()
	shared := filepath.Join(dir, "shared", "k8s")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	pol, err := os.ReadFile(filepath.Join(cfg.Repo, "examples", "policy.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// the example policy (it lists rxe0 beside mlx5_0), and rxe1, the
	// device plugin check's device, for team-a
	pol = []byte(strings.Replace(string(pol), `devices = ["mlx5_0", "rxe0"]`, `devices = ["mlx5_0", "rxe0", "rxe1"]`, 1))
	if !strings.Contains(string(pol), `"rxe1"`) {
		t.Fatalf("examples/policy.toml: team-a's devices are no longer [\"mlx5_0\", \"rxe0\"]; update the bed")
	}
	pol = append(pol, teamBPolicy...)
	if err := os.WriteFile(filepath.Join(shared, "policy.toml"), pol, 0o644); err != nil {
		t.Fatal(err)
	}
	cp, err := StartControlPlane(ctx, cfg.K8sDir, filepath.Join(dir, "k8s-control-plane"),
		map[string]string{NodeA: NodeAIP, NodeB: NodeBIP}, func(n string) string { return filepath.Join(shared, n) })
	if err != nil {
		if cp != nil {
			cp.Stop()
		}
		t.Fatalf("the Kubernetes control plane: %v", err)
	}
	t.Logf("Kubernetes control plane up at %s (guests: %s); logs in %s", cp.Server, cp.GuestURL, cp.Dir)
	logw, err := os.Create(filepath.Join(dir, "k8s-checks.log"))
	if err != nil {
		t.Fatal(err)
	}
	b := &k8sBed{cp: cp, dir: shared, repo: cfg.Repo, bin: cfg.BinDir, runs: min(max(1, cfg.BenchRuns), maxK8sRuns),
		facts: map[string]map[string]string{}, errs: map[string][]string{}, logw: logw, reqSeq: map[string]int{}}
	if v := os.Getenv(EnvK8sChecks); v != "" {
		b.only = map[string]bool{}
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); !slices.Contains(K8sChecks, c) {
				t.Fatalf("$%s: no check %q (the checks: %s)", EnvK8sChecks, c, strings.Join(K8sChecks, ", "))
			}
			b.only[c] = true
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	b.ctx = cctx
	done := make(chan struct{})
	go func() {
		defer close(done)
		verdict := "finished"
		// the kubelets start when the pair reaches x-k8s
		for _, n := range []string{NodeA, NodeB} {
			for {
				if _, err := os.Stat(filepath.Join(shared, n+".started")); err == nil {
					break
				}
				select {
				case <-cctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
		}
		b.run(cctx)
		if cctx.Err() != nil {
			verdict = "gave up: the guests stopped"
		}
		_ = os.WriteFile(filepath.Join(shared, "done"), []byte(verdict), 0o644)
	}()
	return cp.KubeletFwd, func() *k8sBed {
		cancel()
		<-done
		cp.Stop()
		logw.Close()
		return b
	}
}

// TestK8sControlPlane starts the bed's control plane alone, on the host:
// the API server is ready, reports the pinned version, and the controller
// manager's service-account controller and the scheduler's lease show that
// both run against it.
func TestK8sControlPlane(t *testing.T) {
	dir := os.Getenv(EnvK8sBin)
	if m := MissingK8s(dir); len(m) > 0 {
		t.Fatalf("the Kubernetes bed needs:\n  %s", strings.Join(m, "\n  "))
	}
	ctx := context.Background()
	work := t.TempDir()
	cp, err := StartControlPlane(ctx, dir, filepath.Join(work, "cp"), map[string]string{NodeA: NodeAIP},
		func(n string) string { return filepath.Join(work, "nodes", n) })
	if cp != nil {
		defer cp.Stop()
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := cp.Kubectl(ctx, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"gitVersion": "` + K8sVersion + `"`} {
		if strings.Count(out, want) != 2 { // kubectl's and the server's
			t.Errorf("kubectl version: want %s for client and server:\n%s", want, out)
		}
	}
	// the controller manager's controllers act with their own rights:
	// every namespace gets its default service account and the CA's
	// ConfigMap (which the controller manager's own identity may not write)
	if err := until(ctx, time.Minute, func() (bool, error) {
		_, err := cp.Kubectl(ctx, "-n", "default", "get", "serviceaccount/default", "configmap/kube-root-ca.crt")
		return err == nil, err
	}); err != nil {
		t.Errorf("no default service account (kube-controller-manager): %v\n%s", err,
			tailFile(filepath.Join(cp.Dir, "kube-controller-manager.log"), 20))
	}
	// a node's kubeconfig names the API server as the guests reach it
	kc, err := os.ReadFile(filepath.Join(work, "nodes", NodeA, "kubeconfig"))
	if err != nil || !strings.Contains(string(kc), "server: "+cp.GuestURL+"\n") {
		t.Errorf("node a's kubeconfig: %v\n%s", err, kc)
	}
	// the API server's way to a kubelet: the egress proxy refuses what is
	// not a node's kubelet port
	for _, target := range []string{NodeAIP + ":22", "10.9.9.9:10250"} {
		c, err := net.Dial("unix", filepath.Join(cp.Dir, "egress.sock"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.HasPrefix(line, "HTTP/1.1 403 ") {
			t.Errorf("egress CONNECT %s: %q, want 403", target, line)
		}
	}
}
