//go:build e2e

package vm

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/swift-rdma/swift-containerd/test/harness"
)

// K8sServerless is the check of the serverless examples
// (examples/serverless): functions invoked over HTTP with a fork start,
// in RuntimeClass pods on their own networks.
const K8sServerless = "k8s-serverless"

// serverlessCalls is how many calls each example gets from the invoker,
// from serverlessClients at once.
const (
	serverlessCalls   = 200
	serverlessClients = 4
	whiskMarker       = "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX"
)

// serverless: the OpenWhisk-style action (examples/serverless/openwhisk-action.yaml)
// answers an invoker on the other node, /init then /run calls, each result
// carrying its own value back from the peer's echo over a pool QP, with the
// activation markers in the pod's log; kubectl exec of the same function is
// measured beside it. Then the Knative Service
// (examples/serverless/knative-service.yaml): Knative is not in the bed,
// so its revision's pod is made from its template as Knative makes it, and
// answers plain HTTP the same way. Deleting them leaves nothing on the
// nodes.
func (b *k8sBed) serverless(ctx context.Context) {
	c := K8sServerless
	if _, err := b.kubectl(ctx, "label", "node", NodeA, NodeB, "swift.io/podnet=true", "--overwrite"); err != nil {
		b.fail(c, "label nodes: %v", err)
		return
	}
	// what the nodes hold before: the examples' pods leave them so
	before := map[string]string{}
	for _, n := range []string{NodeA, NodeB} {
		st, err := b.nodeState(n)
		if err != nil {
			b.fail(c, "node %s's state: %v", n, err)
			return
		}
		before[n] = strings.Split(st, "; mounts")[0]
	}
	defer b.serverlessCleanup(ctx, before)
	// the RuntimeClass swift-podnet, as examples/k8s/podnet.yaml has it
	if !b.applyExample(ctx, c, "k8s/podnet.yaml", func(y string) string {
		rc, _ := splitDocs(y, `(?m)^kind: RuntimeClass$`)
		return strings.Join(rc, "\n---\n")
	}) || !b.applyExample(ctx, c, "serverless/openwhisk-action.yaml", nil) {
		return
	}
	url, invoker, ok := b.fnPod(ctx, "ow", "ow-action", "action", "ow-echo", "echo", "ow-echo-echo.team-a", "ow-action-action.team-a")
	if !ok {
		return
	}
	out, err := b.onNode(invoker, fmt.Sprintf(`"$R/gwload" init %s '{"value":{"name":"greeter","main":"main","code":"","binary":false,"env":{}}}'`, url), time.Minute)
	if err != nil {
		b.fail(c, "/init: %v", err)
	}
	b.fact(c, "ow.init", sub(out, `(?m)^code (.*)$`)+" "+sub(out, `(?m)^body (.*)$`))
	b.calls(c, "ow", invoker, "ow", url, "ow-echo-echo.team-a")
	out, _ = b.onNode(invoker, fmt.Sprintf(`"$R/gwload" one %s/run '{"value":5}'`, url), time.Minute)
	b.fact(c, "ow.not_object", sub(out, `(?m)^code (.*)$`)+" "+sub(out, `(?m)^body (.*)$`))
	// OpenWhisk's log contract, as the kubelet keeps the container's log
	logs, err := b.kubectl(ctx, "-n", "team-a", "logs", "ow-action", "-c", "action")
	if err != nil {
		b.fail(c, "ow-action's log: %v", err)
	}
	b.fact(c, "ow.markers", strconv.Itoa(strings.Count(logs, whiskMarker)))
	// the same function through kubectl exec, one at a time as the
	// sequential HTTP calls were
	var ms []float64
	for i := range b.runs {
		t0 := time.Now()
		out, err := b.exec(ctx, "team-a", "ow-action", "action", "/bin/sh", "-c",
			fmt.Sprintf(`echo '{"i":%d}' | /.swift/bin/swift-run --peer ow-echo-echo -- roundtrip`, i))
		if err != nil || !strings.Contains(out, fmt.Sprintf(`"echo":{"i":%d}`, i)) {
			b.fail(c, "kubectl exec ... swift-run -- roundtrip: %v: %s", err, out)
			return
		}
		ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
	}
	b.fact(c, "ow.exec_ms", fmt.Sprintf("%.1f", harness.Median(ms)))
	b.fact(c, "ow.exec_n", strconv.Itoa(len(ms)))

	// the Knative Service: its Services and peer as they are, its
	// revision's pod from its template
	kn, err := b.example("serverless/knative-service.yaml")
	if err != nil {
		b.fail(c, "%v", err)
		return
	}
	ksvc, rest := splitDocs(kn, knativeService)
	pod, err := revisionPod(strings.Join(ksvc, "\n---\n"), "00001")
	if err == nil {
		err = b.apply(ctx, strings.Join(append(rest, pod), "\n---\n"))
	}
	if err != nil {
		b.fail(c, "apply examples/serverless/knative-service.yaml (its revision's pod): %v", err)
		return
	}
	// hello-echo's name sorts first: it builds the pool, and its echo
	// holds it
	url, invoker, ok = b.fnPod(ctx, "kn", "hello-rdma-00001-deployment", "user-container", "hello-echo", "echo",
		"hello-echo-echo.team-a", "hello-rdma.team-a")
	if !ok {
		return
	}
	b.calls(c, "kn", invoker, "http", url+"/", "hello-echo-echo.team-a")
}

// knativeService matches a manifest of Knative Serving's API.
const knativeService = `(?m)^apiVersion: serving\.knative\.dev/v1$`

// splitDocs splits a manifest into its documents that match re and the
// others, each in order.
func splitDocs(yaml, re string) (match, rest []string) {
	r := regexp.MustCompile(re)
	for _, d := range strings.Split(yaml, "\n---\n") {
		if r.MatchString(d) {
			match = append(match, d)
		} else {
			rest = append(rest, d)
		}
	}
	return match, rest
}

// fnPod waits for a function's pod and its peer to run and pair, and for
// the peer's echo to hold the pool; it returns the function's URL and the
// node an invoker reaches it from (the other one: a macvlan pod is out of
// its own node's reach). Facts k.nodes, k.status.
func (b *k8sBed) fnPod(ctx context.Context, k, pod, ctr, peer, peerCtr, peerName, name string) (string, string, bool) {
	c := K8sServerless
	var ip string
	nodeOf := map[string]string{}
	for _, p := range []string{pod, peer} {
		if err := b.waitRunning(ctx, "team-a", p, 4*time.Minute); err != nil {
			b.fail(c, "%s Running: %v", p, err)
			return "", "", false
		}
		out, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "pod", p, "-o", "jsonpath={.spec.nodeName} {.status.podIP}")
		f := strings.Fields(out)
		if len(f) != 2 {
			b.fail(c, "%s's node and address: %q", p, out)
			return "", "", false
		}
		nodeOf[p] = f[0]
		if p == pod {
			ip = f[1]
		}
	}
	b.fact(c, k+".nodes_differ", strconv.FormatBool(nodeOf[pod] != nodeOf[peer]))
	st, err := b.peerStatus(ctx, pod, ctr, peerName)
	b.fact(c, k+".status", firstLines(st, `^(zygote|peer) `))
	if err != nil {
		b.fail(c, "%s's zygote never connected to %s's: %v", pod, peer, err)
		return "", "", false
	}
	// the echo holds the whole pool (the examples' 32 QPs)
	held := regexp.MustCompile(`(?m)^peer ` + regexp.QuoteMeta(name) + ` .* free 0 assigned 32\b`)
	err = until(ctx, 2*time.Minute, func() (bool, error) {
		st, err := b.exec(ctx, "team-a", peer, peerCtr, "/.swift/bin/swift-run", "--status")
		return err == nil && held.MatchString(st), fmt.Errorf("%v: %s", err, st)
	})
	if err != nil {
		b.fail(c, "%s's echo never held its QPs with %s: %v", peer, pod, err)
		return "", "", false
	}
	invoker := NodeA
	if nodeOf[pod] == NodeA {
		invoker = NodeB
	}
	return "http://" + ip + ":8080", invoker, true
}

// calls has the invoker make serverlessCalls calls, serverlessClients at
// once, then serverlessCalls/4 one at a time (facts k.ok, k.bad,
// k.first_bad, k.qpns, k.median_us, k.p99_us, k.seq_median_us).
func (b *k8sBed) calls(c, k, invoker, mode, url, peer string) {
	out, err := b.onNode(invoker, fmt.Sprintf(`"$R/gwload" %s %s %d %s %d`, mode, url, serverlessCalls, peer, serverlessClients), 10*time.Minute)
	if err != nil {
		b.fail(c, "gwload %s: %v", mode, err)
	}
	for _, f := range []string{"ok", "bad", "first_bad", "qpns", "median_us", "p99_us"} {
		b.fact(c, k+"."+f, sub(out, `(?m)^`+f+` (.*)$`))
	}
	out, err = b.onNode(invoker, fmt.Sprintf(`"$R/gwload" %s %s %d %s 1`, mode, url, serverlessCalls/4, peer), 10*time.Minute)
	if err != nil {
		b.fail(c, "gwload %s, one at a time: %v", mode, err)
	}
	b.fact(c, k+".seq_ok", sub(out, `(?m)^ok (.*)$`))
	b.fact(c, k+".seq_median_us", sub(out, `(?m)^median_us (.*)$`))
}

// serverlessCleanup deletes the examples' pods and Services and waits
// until the nodes hold the leases, shims and zygotes they held before
// (fact left: what differs).
func (b *k8sBed) serverlessCleanup(ctx context.Context, before map[string]string) {
	c := K8sServerless
	if _, err := b.kubectl(ctx, "-n", "team-a", "delete", "pod,service", "ow-action", "ow-echo", "hello-echo",
		"hello-rdma-00001-deployment", "hello-rdma-zygotes", "--ignore-not-found", "--wait=true", "--timeout=3m"); err != nil {
		b.fail(c, "delete the examples' pods: %v", err)
	}
	var left []string
	for _, n := range []string{NodeA, NodeB} {
		var st string
		until(ctx, time.Minute, func() (bool, error) {
			out, err := b.nodeState(n)
			st = strings.Split(out, "; mounts")[0]
			return err == nil && st == before[n], err
		})
		if st != before[n] {
			left = append(left, fmt.Sprintf("%s: %s, before %s", n, st, before[n]))
		}
	}
	b.fact(c, "left", strings.Join(left, "; "))
}

// revisionPod makes the pod Knative's revision rev of a Knative Service
// would run: the template's labels and annotations with Knative's labels,
// its spec without Knative's own fields, the container named
// user-container unless named, PORT set to its port, and timeoutSeconds
// to end. (No queue-proxy: nothing routes through Knative here.)
func revisionPod(ksvc, rev string) (string, error) {
	if !regexp.MustCompile(knativeService).MatchString(ksvc) ||
		!regexp.MustCompile(`(?m)^kind: Service$`).MatchString(ksvc) {
		return "", fmt.Errorf("not a Knative Service: %q", firstLines(ksvc, `^(apiVersion|kind):`))
	}
	var s struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec struct {
			Template struct {
				Metadata struct {
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
				Spec map[string]any `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(ksvc), &s); err != nil {
		return "", fmt.Errorf("the Knative Service: %w", err)
	}
	t := s.Spec.Template
	labels := map[string]string{}
	for k, v := range t.Metadata.Labels {
		labels[k] = v
	}
	labels["serving.knative.dev/service"] = s.Metadata.Name
	labels["serving.knative.dev/revision"] = s.Metadata.Name + "-" + rev
	// Knative gives a revision's pod its timeoutSeconds (300 unless set)
	// to end
	spec := map[string]any{"terminationGracePeriodSeconds": float64(300)}
	if v, ok := t.Spec["timeoutSeconds"]; ok {
		spec["terminationGracePeriodSeconds"] = v
	}
	for k, v := range t.Spec {
		if k != "containerConcurrency" && k != "timeoutSeconds" && k != "responseStartTimeoutSeconds" && k != "idleTimeoutSeconds" {
			spec[k] = v
		}
	}
	ctrs, _ := spec["containers"].([]any)
	if len(ctrs) != 1 {
		return "", fmt.Errorf("the Knative Service's template has %d containers, want 1", len(ctrs))
	}
	ct, _ := ctrs[0].(map[string]any)
	if ct == nil {
		return "", fmt.Errorf("the Knative Service's container is not an object")
	}
	if ct["name"] == nil {
		ct["name"] = "user-container"
	}
	port := 8080
	if ps, _ := ct["ports"].([]any); len(ps) == 1 {
		if p, _ := ps[0].(map[string]any); p != nil {
			if n, ok := p["containerPort"].(float64); ok {
				port = int(n)
			}
		}
	}
	env, _ := ct["env"].([]any)
	ct["env"] = append(env, map[string]any{"name": "PORT", "value": strconv.Itoa(port)})
	meta := map[string]any{"name": s.Metadata.Name + "-" + rev + "-deployment", "namespace": s.Metadata.Namespace, "labels": labels}
	if len(t.Metadata.Annotations) > 0 {
		meta["annotations"] = t.Metadata.Annotations
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
	out, err := yaml.Marshal(pod)
	return string(out), err
}

// checkServerless asserts the facts of serverless.
func checkServerless(want, match func(k, v string)) {
	// the OpenWhisk-style action, from the other node
	want("ow.nodes_differ", "true")
	match("ow.status", `peer ow-echo-echo\.team-a ow-echo\.team-a\.svc\.cluster\.local:18515 connected `)
	want("ow.init", `200 {"ok":true}`)
	want("ow.ok", strconv.Itoa(serverlessCalls))
	want("ow.bad", "0")
	want("ow.first_bad", "")
	match("ow.qpns", `^[1-9][0-9]*$`)
	match("ow.median_us", `^[1-9][0-9]*$`)
	want("ow.seq_ok", strconv.Itoa(serverlessCalls/4))
	match("ow.seq_median_us", `^[1-9][0-9]*$`)
	match("ow.not_object", `^400 \{"error":".*value.*"\}$`)
	// every /run's markers on stdout and on stderr: the calls, and the
	// not-object one with the GET that opened its connection
	want("ow.markers", strconv.Itoa(2*(serverlessCalls+serverlessCalls/4+2)))
	match("ow.exec_ms", `^[1-9][0-9.]*$`)
	// the Knative Service's revision: its zygote named by swift.io/name
	want("kn.nodes_differ", "true")
	match("kn.status", `(?m)^zygote hello-rdma\.team-a .*peer hello-echo-echo\.team-a hello-echo\.team-a\.svc\.cluster\.local:18515 connected `)
	want("kn.ok", strconv.Itoa(serverlessCalls))
	want("kn.bad", "0")
	want("kn.first_bad", "")
	match("kn.qpns", `^[1-9][0-9]*$`)
	want("kn.seq_ok", strconv.Itoa(serverlessCalls/4))
	match("kn.seq_median_us", `^[1-9][0-9]*$`)
	want("left", "")
}
