//go:build e2e

package vm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// K8sHelm is the check of the Helm chart (deploy/helm/swift) on the bed.
const K8sHelm = "k8s-helm"

// helmNS is the chart's release namespace in the bed: not swift-system,
// whose objects the examples made.
const helmNS = "swift-helm"

// helm runs $SWIFT_HELM_BIN against the bed's API server.
func (b *k8sBed) helm(ctx context.Context, args ...string) (string, error) {
	bin := os.Getenv("SWIFT_HELM_BIN")
	if bin == "" {
		return "", fmt.Errorf("SWIFT_HELM_BIN is not set (make deps builds helm into the Kubernetes cache dir; the Makefile sets it)")
	}
	cctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, bin, append([]string{"--kubeconfig", b.cp.Kubeconfig}, args...)...)
	tmp := filepath.Join(b.dir, "helm-home")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+tmp+"/cache", "HELM_CONFIG_HOME="+tmp+"/config", "HELM_DATA_HOME="+tmp+"/data")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	b.logf("helm %s\n%s", strings.Join(args, " "), strings.TrimRight(out.String(), "\n"))
	return out.String(), err
}

// helmChart: the image of Swift's binaries (make image) imported into
// both nodes' containerd, as an air-gapped node gets it; the chart
// installed, its agent in a DaemonSet on both nodes in place of the bed's
// node binary: it publishes both nodes' devices, a RuntimeClass pod whose
// claim selects a device by attribute through the chart's DeviceClass
// runs with it, and the agent's metrics count its lease; then helm
// uninstall takes every object of the chart away.
func (b *k8sBed) helmChart(ctx context.Context) {
	c := K8sHelm
	img := os.Getenv("SWIFT_IMAGE")
	if img == "" {
		b.fail(c, "SWIFT_IMAGE is not set: the docker-archive of Swift's image (make image writes out/swift-image.tar; make test-vm sets it)")
		return
	}
	data, err := os.ReadFile(img)
	if err == nil {
		err = os.WriteFile(filepath.Join(b.dir, "swift-image.tar"), data, 0o644)
	}
	if err != nil {
		b.fail(c, "the image: %v", err)
		return
	}
	nodes := []string{NodeA, NodeB}
	for _, n := range nodes {
		out, err := b.onNode(n, `ctr --address "$W/containerd.sock" -n k8s.io images import "$K8S/swift-image.tar" >/dev/null && `+
			`ctr --address "$W/containerd.sock" -n k8s.io images ls -q | grep -x 'docker.io/swift-rdma/swift:[0-9.]*'`, 3*time.Minute)
		b.fact(c, n+".image", strings.TrimSpace(out))
		if err != nil {
			b.fail(c, "import the image on %s: %v: %s", n, err, out)
			return
		}
	}
	// the chart makes the RuntimeClass and the DeviceClass the examples
	// made, and its installer the runtime entry and the node label: the
	// bed's own entries (swift, swift-podnet) leave containerd's config,
	// and the label the nodes
	b.kubectl(ctx, "delete", "runtimeclass", "swift", "--ignore-not-found")
	b.kubectl(ctx, "delete", "deviceclass", "swift-rdma", "--ignore-not-found")
	before := map[string]string{}
	for _, n := range nodes {
		out, err := b.onNode(n, `bed_entries uninstall >/dev/null && `+nodeConfigState+` && `+
			// the node config of the chart's runtime entry: the zygote's
			// files where the installer puts them, swift-hook beside its shim
			`sed -e 's#^bin_dir = .*#bin_dir = "`+helmPrefix+`/lib/swift"#' -e '/^\[hooks\]/,/^path = /d' "$W/swift.toml" >"$W/swift-helm.toml"`, time.Minute)
		if err != nil {
			b.fail(c, "take the bed's runtime entries out on %s: %v", n, err)
			return
		}
		before[n] = strings.TrimSpace(out)
		b.fact(c, n+".before", before[n])
	}
	b.kubectl(ctx, "label", "node", NodeA, NodeB, "swift.io/runtime-")
	chart := filepath.Join(b.repo, "deploy", "helm", "swift")
	// the bed's paths: its node config, containerd's config and state are
	// under /run/swiftvm; no systemd: the bed's restart command
	vals := []string{"--set", "image.pullPolicy=Never", "--set", "agent.nodeConfig=/run/swiftvm/swift-helm.toml",
		"--set", "agent.configDir=/run/swiftvm", "--set", "agent.cdiDir=/run/swiftvm/cdi",
		"--set", "agent.containerdStateDir=/run/swiftvm/containerd", "--set", "agent.logLevel=debug",
		"--set", "installer.prefix=" + helmPrefix, "--set", "installer.stateDir=/run/swiftvm/swift-install",
		"--set", "installer.containerdConfig=/run/swiftvm/containerd.toml",
		"--set", "installer.restartCommand=/bin/sh /run/swiftvm/restart-containerd"}
	// no kube-proxy in the bed: the agents reach the API server where the
	// kubelets do
	host, port, ok := strings.Cut(strings.TrimPrefix(b.cp.GuestURL, "https://"), ":")
	if !ok {
		b.fail(c, "the API server's guest URL %q has no port", b.cp.GuestURL)
		return
	}
	for _, p := range []string{"agent", "installer"} {
		vals = append(vals, "--set", p+".extraEnv[0].name=KUBERNETES_SERVICE_HOST", "--set-string", p+".extraEnv[0].value="+host,
			"--set", p+".extraEnv[1].name=KUBERNETES_SERVICE_PORT", "--set-string", p+".extraEnv[1].value="+port)
	}
	defer func() {
		// the bed's own entries back, for the scenarios after this one
		for _, n := range nodes {
			if out, err := b.onNode(n, `bed_entries install >/dev/null`, 3*time.Minute); err != nil {
				b.fail(c, "put the bed's runtime entries back on %s: %v: %s", n, err, out)
			}
		}
		b.kubectl(ctx, "label", "node", NodeA, NodeB, "swift.io/runtime=true", "--overwrite")
	}()
	t0 := time.Now()
	out, err := b.helm(ctx, append([]string{"install", "swift", chart, "--namespace", helmNS, "--create-namespace",
		"--wait", "--timeout", "5m"}, vals...)...)
	if err != nil {
		ds, _ := b.kubectl(ctx, "-n", helmNS, "describe", "pods")
		b.fail(c, "helm install: %v: %s\n%s", err, out, ds)
		b.helm(ctx, "uninstall", "swift", "--namespace", helmNS, "--wait")
		return
	}
	b.fact(c, "installed_s", fmt.Sprintf("%.0f", time.Since(t0).Seconds()))
	ready, _ := b.cp.Kubectl(ctx, "-n", helmNS, "get", "daemonset", "swift-node", "-o", "jsonpath={.status.numberReady}/{.status.desiredNumberScheduled}")
	b.fact(c, "agents_ready", strings.TrimSpace(ready))
	ready, _ = b.cp.Kubectl(ctx, "-n", helmNS, "get", "daemonset", "swift-install", "-o", "jsonpath={.status.numberReady}/{.status.desiredNumberScheduled}")
	b.fact(c, "installers_ready", strings.TrimSpace(ready))
	b.fact(c, "labels", b.nodeLabels(ctx))
	// containerd's restart can cost an installer its container: a
	// containerd that comes back slowly may fail to load the pod's
	// sandbox ("Failed to load sandbox status"), and the kubelet then
	// makes the pod anew. The replacement's run must find the node
	// installed; wait for it to be Ready again.
	if out, err := b.kubectl(ctx, "-n", helmNS, "wait", "pod", "-l", "app.kubernetes.io/component=installer",
		"--for=condition=Ready", "--timeout=3m"); err != nil {
		b.fail(c, "installer pods Ready after the install: %v: %s", err, out)
	}
	logs, _ := b.cp.Kubectl(ctx, "-n", helmNS, "logs", "-l", "app.kubernetes.io/component=installer", "--tail=-1", "--prefix",
		"--max-log-requests=4")
	b.logf("installer logs:\n%s", logs)
	for _, n := range nodes {
		pod, _ := b.cp.Kubectl(ctx, "-n", helmNS, "get", "pods", "-l", "app.kubernetes.io/component=installer",
			"--field-selector", "spec.nodeName="+n, "-o", "jsonpath={.items[0].metadata.name} {.items[0].status.containerStatuses[0].restartCount}")
		name, restarts, _ := strings.Cut(strings.TrimSpace(pod), " ")
		b.fact(c, n+".installer_restarts", restarts)
		// each run's outcome, the previous container's first
		var runs []string
		if restarts != "0" {
			l, _ := b.cp.Kubectl(ctx, "-n", helmNS, "logs", name, "--previous")
			b.logf("node %s's previous installer container:\n%s", n, l)
			runs = installerRuns(l)
		}
		l, _ := b.cp.Kubectl(ctx, "-n", helmNS, "logs", name)
		b.fact(c, n+".installer", strings.Join(append(runs, installerRuns(l)...), " then "))
		out, _ := b.onNode(n, `grep -h '^  runtime_path = \|^  SwiftConfig = ' "$W/conf.d/swift.toml"; grep -c '^imports = ' "$W/containerd.toml"; `+
			`ls "`+helmPrefix+`/bin" | tr '\n' ' '; ls -l "`+helmPrefix+`/bin/swift-hook" | cut -d' ' -f1,3`, time.Minute)
		b.fact(c, n+".entry", strings.Join(strings.Fields(out), " "))
		h, _ := b.cp.Kubectl(ctx, "get", "node", n, "-o", "jsonpath={.status.runtimeHandlers[*].name}")
		hs := strings.Fields(h)
		sort.Strings(hs)
		b.fact(c, n+".runtime_handlers", strings.Join(hs, " "))
	}
	b.forgeLabel(ctx)
	rc, _ := b.cp.Kubectl(ctx, "get", "runtimeclass", "swift", "-o", `jsonpath={.handler} {.scheduling.nodeSelector}`)
	b.fact(c, "runtimeclass", strings.TrimSpace(rc))
	// both nodes' devices, published by the DaemonSet's agents
	var slices string
	until(ctx, 2*time.Minute, func() (bool, error) {
		out, err := b.cp.Kubectl(ctx, "get", "resourceslices", "-o",
			`jsonpath={range .items[?(@.spec.driver=="rdma.swift.io")]}{.spec.nodeName}:{range .spec.devices[*]}{.name}/{.attributes.portState.string}/{.attributes.forkSharing.string}{end} {end}`)
		f := strings.Fields(out)
		sort.Strings(f)
		slices = strings.Join(f, " ")
		return err == nil && slices == "a:rxe0/ACTIVE/relay b:rxe0/ACTIVE/relay", err
	})
	b.fact(c, "slices", slices)
	b.forgeSlices(ctx)
	// a RuntimeClass pod with a claim that selects by attribute, through
	// the chart's DeviceClass
	y, err := b.example("dra/claim.yaml")
	if err != nil {
		b.fail(c, "%v", err)
		return
	}
	y = y[strings.Index(y, "kind: ResourceClaimTemplate")-len("apiVersion: resource.k8s.io/v1\n"):]
	y = strings.ReplaceAll(strings.ReplaceAll(y, "worker-dra", "worker-helm"), "rdma-active", "rdma-relay")
	y = strings.Replace(y, `expression: device.attributes["rdma.swift.io"].portState == "ACTIVE"`,
		`expression: device.attributes["rdma.swift.io"].portState == "ACTIVE" && device.attributes["rdma.swift.io"].forkSharing == "relay"`, 1)
	y = pinned(y, NodeB)
	if b.start(ctx, c, y, "worker-helm", 4*time.Minute) {
		b.inside(ctx, c, "worker-helm", "team-a", "worker-helm", "worker")
		// its shim is the one the installer put on the node
		shim, _ := b.onNode(NodeB, `for p in /proc/[0-9]*; do readlink "$p/exe"; done 2>/dev/null | grep -c '^`+helmPrefix+`/bin/containerd-shim-swift-v2$'`, time.Minute)
		b.fact(c, "b.installed_shims", strings.TrimSpace(shim))
		alloc, _ := b.cp.Kubectl(ctx, "-n", "team-a", "get", "resourceclaims", "-o",
			`jsonpath={range .items[*]}{.status.allocation.devices.results[0].driver}/{.status.allocation.devices.results[0].pool}/{.status.allocation.devices.results[0].device}{end}`)
		b.fact(c, "allocated", strings.TrimSpace(alloc))
		var leases string
		until(ctx, time.Minute, func() (bool, error) {
			out, err := b.onNode(NodeB, "wget -qO- http://127.0.0.1:9478/metrics | grep '^swift_tenant_leases{tenant=\"team-a\"}'", time.Minute)
			leases = strings.TrimSpace(out)
			return err == nil && strings.HasSuffix(leases, " 1"), err
		})
		b.fact(c, "b.metrics_leases", leases)
		b.kubectl(ctx, "-n", "team-a", "delete", "pod", "worker-helm", "--wait=true", "--timeout=2m")
	}
	b.kubectl(ctx, "-n", "team-a", "delete", "resourceclaimtemplate", "rdma-relay", "--ignore-not-found")
	// the installers' logs while they uninstall (their pods go with it)
	lctx, lcancel := context.WithCancel(ctx)
	var ulog bytes.Buffer
	follow := exec.CommandContext(lctx, filepath.Join(b.cp.BinDir, "kubectl"), "--kubeconfig", b.cp.Kubeconfig, "-n", helmNS, "logs", "-f",
		"-l", "app.kubernetes.io/component=installer", "--prefix", "--tail=5", "--max-log-requests=4")
	follow.Stdout, follow.Stderr = &ulog, &ulog
	if err := follow.Start(); err != nil {
		b.fail(c, "kubectl logs -f: %v", err)
	}
	time.Sleep(2 * time.Second)
	t0 = time.Now()
	if out, err := b.helm(ctx, "uninstall", "swift", "--namespace", helmNS, "--wait", "--timeout", "6m"); err != nil {
		b.fail(c, "helm uninstall: %v: %s", err, out)
	}
	b.fact(c, "uninstalled_s", fmt.Sprintf("%.0f", time.Since(t0).Seconds()))
	lcancel()
	_ = follow.Wait()
	b.logf("the installers' logs while uninstalling:\n%s", ulog.String())
	var undone, took []string
	for _, m := range regexp.MustCompile(`msg="uninstalled in ([0-9hms.]+): ([0-9]+ files removed, containerd config changed (?:true|false), restarted (?:true|false), label removed (?:true|false))"`).
		FindAllStringSubmatch(ulog.String(), -1) {
		took, undone = append(took, m[1]), append(undone, m[2])
	}
	sort.Strings(undone)
	b.fact(c, "uninstallers", strings.Join(undone, "; "))
	b.fact(c, "uninstall_took", strings.Join(took, " "))
	// each node's containerd config byte for byte as before, nothing of
	// the installer's left, no label
	for _, n := range nodes {
		out, err := b.onNode(n, nodeConfigState+` && ls -d "`+helmPrefix+`" /run/swiftvm/swift-install 2>/dev/null | wc -l`, time.Minute)
		f := strings.Split(strings.TrimSpace(out), "\n")
		if err != nil || len(f) < 2 {
			b.fail(c, "node %s after helm uninstall: %v: %s", n, err, out)
			continue
		}
		b.fact(c, n+".restored", fmt.Sprintf("%v", strings.TrimSpace(strings.Join(f[:len(f)-1], "\n")) == before[n]))
		b.fact(c, n+".left", f[len(f)-1])
	}
	b.fact(c, "labels_after_uninstall", b.nodeLabels(ctx))
	left, _ := b.cp.Kubectl(ctx, "get", "runtimeclass,deviceclass,clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding",
		"-l", "app.kubernetes.io/instance=swift", "-o", "name")
	ds, _ := b.cp.Kubectl(ctx, "-n", helmNS, "get", "daemonset,serviceaccount,service", "-l", "app.kubernetes.io/instance=swift", "-o", "name")
	b.fact(c, "left_after_uninstall", strings.TrimSpace(left+ds))
	b.kubectl(ctx, "delete", "namespace", helmNS, "--wait=true", "--timeout=2m")
}

// helmPrefix is where the chart's installer puts Swift on the bed's
// nodes (their /usr/local is the host's, read-only).
const helmPrefix = "/run/swiftvm/opt"

// nodeConfigState prints containerd's root config's digest and the
// drop-in directory's files: what helm uninstall must leave as helm
// install found it.
const nodeConfigState = `sha256sum <"$W/containerd.toml" | cut -d' ' -f1 && ls "$W/conf.d" 2>/dev/null | tr '\n' ' ' && echo`

// nodeLabels is each node's swift.io/runtime label, "a=true b=true".
func (b *k8sBed) nodeLabels(ctx context.Context) string {
	out, _ := b.cp.Kubectl(ctx, "get", "nodes", "-o", `jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.swift\.io/runtime} {end}`)
	return strings.TrimSpace(out)
}

// forgeLabel: node a's installer, with its own token, may change only its
// own node's label swift.io/runtime: node b's, and another label of its
// own node, are refused by the chart's ValidatingAdmissionPolicy.
func (b *k8sBed) forgeLabel(ctx context.Context) {
	c := K8sHelm
	token, err := b.podToken(ctx, "installer", "swift-install")
	if err != nil {
		b.fail(c, "%v", err)
		return
	}
	asInstaller := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, filepath.Join(b.cp.BinDir, "kubectl"), append([]string{"--kubeconfig", os.DevNull, "--server", b.cp.Server,
			"--insecure-skip-tls-verify", "--token", token}, args...)...)
		out, err := cmd.CombinedOutput()
		b.logf("kubectl %s (as node a's installer)\n%s", strings.Join(args, " "), out)
		return string(out), err
	}
	// a value of its own, so that the request is made (kubectl sends
	// none for the value there already); the label set back after
	out, err := asInstaller("label", "node", NodeA, "swift.io/runtime=probe", "--overwrite")
	b.fact(c, "forge_label.own", fmt.Sprintf("%v", err == nil && strings.Contains(out, "node/a labeled")))
	b.kubectl(ctx, "label", "node", NodeA, "swift.io/runtime=true", "--overwrite")
	out, _ = asInstaller("label", "node", NodeB, "swift.io/runtime=forged", "--overwrite")
	b.fact(c, "forge_label.other_node", sub(out, `(the installer of node '[a-z]+' may not change node '[a-z]+')`))
	out, _ = asInstaller("label", "node", NodeA, "rdma.example/tier=gold")
	b.fact(c, "forge_label.other_label", sub(out, `(the installer may change only the node label [a-z./]+)`))
	b.kubectl(ctx, "label", "node", NodeA, "rdma.example/tier-")
}

// podToken is a token of the service account sa bound to node a's pod of
// the chart's component (so naming node a).
func (b *k8sBed) podToken(ctx context.Context, component, sa string) (string, error) {
	pod, _ := b.cp.Kubectl(ctx, "-n", helmNS, "get", "pods", "-l", "app.kubernetes.io/component="+component,
		"--field-selector", "spec.nodeName="+NodeA, "-o", "jsonpath={.items[0].metadata.name} {.items[0].metadata.uid}")
	f := strings.Fields(pod)
	if len(f) != 2 {
		return "", fmt.Errorf("node a's %s pod: %q", component, pod)
	}
	token, err := b.cp.Kubectl(ctx, "-n", helmNS, "create", "token", sa, "--bound-object-kind", "Pod",
		"--bound-object-name", f[0], "--bound-object-uid", f[1], "--duration", "10m")
	if err != nil {
		return "", fmt.Errorf("a token of node a's %s: %v: %s", component, err, token)
	}
	return strings.TrimSpace(token), nil
}

// forgeSlices: node a's agent, with its own token (bound to its pod, so
// naming its node), writes a ResourceSlice of node a but not one of node
// b: the chart's ValidatingAdmissionPolicy refuses it, although the
// agent's ClusterRole lets it create slices.
func (b *k8sBed) forgeSlices(ctx context.Context) {
	c := K8sHelm
	token, err := b.podToken(ctx, "node-agent", "swift-node")
	if err != nil {
		b.fail(c, "%v", err)
		return
	}
	slice := func(node string) string {
		return fmt.Sprintf("apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: forged-%s}\n"+
			"spec:\n  driver: rdma.swift.io\n  nodeName: %s\n  pool: {name: %s, generation: 99, resourceSliceCount: 1}\n"+
			"  devices: [{name: forged}]\n", node, node, node)
	}
	asAgent := func(node string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(cctx, filepath.Join(b.cp.BinDir, "kubectl"), "--kubeconfig", os.DevNull, "--server", b.cp.Server,
			"--insecure-skip-tls-verify", "--token", token, "create", "-f", "-")
		cmd.Stdin = strings.NewReader(slice(node))
		out, err := cmd.CombinedOutput()
		b.logf("kubectl create (as node a's agent) a slice of node %s\n%s", node, out)
		return string(out), err
	}
	out, err := asAgent(NodeA)
	b.fact(c, "forge.own_node", fmt.Sprintf("%v", err == nil && strings.Contains(out, "forged-a created")))
	b.kubectl(ctx, "delete", "resourceslice", "forged-a", "--ignore-not-found")
	out, err = asAgent(NodeB)
	b.fact(c, "forge.other_node", sub(out, `(the agent of node '[a-z]+' may not write the ResourceSlices of node '[a-z]+')`))
	if err == nil {
		b.kubectl(ctx, "delete", "resourceslice", "forged-b", "--ignore-not-found")
	}
}

// installerRuns is the outcome of each install run in an installer's log:
// its counts, or that it was stopped midway.
func installerRuns(log string) []string {
	r := regexp.MustCompile(`(installed in [0-9hms.]+: [0-9]+ files written, containerd config changed (?:true|false), restarted (?:true|false), labelled (?:true|false))|msg="(stopped while installing)"`)
	var out []string
	for _, m := range r.FindAllStringSubmatch(log, -1) {
		out = append(out, m[1]+m[2])
	}
	return out
}
