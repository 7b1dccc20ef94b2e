package integration

// The examples' own semantics, checked with the project's parsers: these
// tests need no daemon and carry no build tag, so plain `go test
// ./test/integration` runs them (and `make integration` with the rest).

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/cdispec"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/inject"
	"github.com/swift-rdma/swift-containerd/install"
	"github.com/swift-rdma/swift-containerd/policy"
)

func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// The RuntimeClass of the examples, the node label it schedules on, and
// what a node agent's DaemonSet must carry to run on every Swift node.
const (
	exampleRuntimeClass = "swift"
	swiftNodeLabel      = "swift.io/runtime"
	nodeCritical        = "system-node-critical"
	// KnativeServing is the apiVersion of a Knative Service
	KnativeServing = "serving.knative.dev/v1"
)

// exampleRuntimeClasses are the examples' RuntimeClasses: the file that
// defines each, its handler (a runtime entry swiftctl install containerd
// writes: swift-podnet with --runtime-name) and the node labels it
// schedules on.
var exampleRuntimeClasses = map[string]struct {
	file, handler string
	nodeSelector  map[string]string
}{
	exampleRuntimeClass: {"runtimeclass.yaml", install.DefaultRuntimeName, map[string]string{swiftNodeLabel: "true"}},
	"swift-podnet":      {"k8s/podnet.yaml", "swift-podnet", map[string]string{swiftNodeLabel: "true", "swift.io/podnet": "true"}},
}

// exampleNodeDevices are the RDMA devices of the node the examples are
// written for (the devices they name).
var exampleNodeDevices = []string{"mlx5_0"}

// exampleFiles lists every file under examples/ and the test that checks
// it: a new example must be added here, and to a test.
var exampleFiles = map[string]string{
	"config.toml":                      "TestExampleNodeConfig",
	"policy.toml":                      "TestExampleManifests, TestExamplePolicy (e2e), policy unit tests",
	"runtimeclass.yaml":                "TestExampleManifests",
	"cdi/pod.yaml":                     "TestExampleManifests",
	"device-plugin/pod.yaml":           "TestExampleManifests",
	"dra/claim.yaml":                   "TestExampleManifests",
	"k8s/tenant-keys.yaml":             "TestExampleManifests",
	"k8s/zygote-pod.yaml":              "TestExampleManifests",
	"k8s/podnet.yaml":                  "TestExampleManifests, the VM suite's k8s-podnet",
	"k8s/node-agent-rbac.yaml":         "TestExampleManifests, the VM suite's k8s-nodeconf",
	"serverless/openwhisk-action.yaml": "TestExampleManifests, the VM suite's k8s-serverless",
	"serverless/knative-service.yaml":  "TestExampleManifests, the VM suite's k8s-serverless (its revision's pod)",
	"crictl/pod.json":                  "TestExampleCrictl, the quickstart VM scenario",
	"crictl/container.json":            "TestExampleCrictl, the quickstart VM scenario",
	"containerd/swift-v2.toml":         "TestExampleDropIns (e2e), install's TestExamplesAreGenerated",
	"containerd/swift-v3.toml":         "TestExampleDropIns (e2e), install's TestExamplesAreGenerated",
}

// TestExamplesAllChecked: every file under examples/ is one a test checks.
func TestExamplesAllChecked(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "examples")
	var found []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		found = append(found, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		if exampleFiles[f] == "" {
			t.Errorf("examples/%s is checked by no test: check it and list it in exampleFiles", f)
		}
	}
	for f, by := range exampleFiles {
		if by != "" && !slices.Contains(found, f) {
			t.Errorf("examples/%s is gone (listed as checked by %s)", f, by)
		}
	}
}

// TestExampleNodeConfig: the example passes the node config's parser and
// documents the defaults exactly.
func TestExampleNodeConfig(t *testing.T) {
	path := filepath.Join(repoRoot(t), "examples", "config.toml")
	data, err := os.ReadFile(path) // config.Load would take a missing file for the defaults
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	d := config.Default()
	// the example names the default policy path itself, so that a policy
	// not yet in place fails closed
	d.PolicyPathSet = true
	if len(c.RDMA.Env) == 0 {
		c.RDMA.Env = d.RDMA.Env // an empty [rdma.env] table decodes as an empty map
	}
	if !reflect.DeepEqual(c, d) {
		t.Errorf("examples/config.toml = %+v, defaults are %+v", c, d)
	}
	if c.PolicyPath != config.DefaultPolicyPath {
		t.Errorf("examples/config.toml: policy_path %q, want %q", c.PolicyPath, config.DefaultPolicyPath)
	}
}

// manifest is the part of a Kubernetes object the examples are checked on.
type manifest struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   objectMeta      `json:"metadata"`
	Handler    string          `json:"handler"` // RuntimeClass
	Scheduling *scheduling     `json:"scheduling"`
	Data       map[string]any  `json:"data"`
	Spec       json.RawMessage `json:"spec"`
}

type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type scheduling struct {
	NodeSelector map[string]string `json:"nodeSelector"`
	Tolerations  []toleration      `json:"tolerations"`
}

type toleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Value    string `json:"value"`
	Effect   string `json:"effect"`
}

type podSpec struct {
	RuntimeClassName  string            `json:"runtimeClassName"`
	HostNetwork       bool              `json:"hostNetwork"`
	PriorityClassName string            `json:"priorityClassName"`
	NodeSelector      map[string]string `json:"nodeSelector"`
	Tolerations       []toleration      `json:"tolerations"`
	Containers        []containerSpec   `json:"containers"`
	InitContainers    []containerSpec   `json:"initContainers"`
	Volumes           []struct {
		Name     string `json:"name"`
		HostPath *struct {
			Path string `json:"path"`
		} `json:"hostPath"`
	} `json:"volumes"`
}

type containerSpec struct {
	Name      string   `json:"name"`
	Command   []string `json:"command"`
	Args      []string `json:"args"`
	Resources struct {
		Limits   map[string]any `json:"limits"`
		Requests map[string]any `json:"requests"`
	} `json:"resources"`
}

// workload is the part of a DaemonSet, Deployment, StatefulSet or Job
// spec that holds its pods.
type workload struct {
	Template struct {
		Metadata objectMeta `json:"metadata"`
		Spec     podSpec    `json:"spec"`
	} `json:"template"`
}

// clusterScoped are the kinds the examples use that live in no namespace.
var clusterScoped = map[string]bool{
	"Namespace": true, "RuntimeClass": true, "DeviceClass": true,
	"PriorityClass": true, "ClusterRole": true, "ClusterRoleBinding": true,
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// documents splits a YAML stream into its documents, dropping those that
// hold only comments.
func documents(data string) []string {
	var out []string
	for _, d := range docSep.Split(data, -1) {
		for _, line := range strings.Split(d, "\n") {
			if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// examplePod is a pod, or a workload's pod template, of an example.
type examplePod struct {
	file, where string
	namespace   string
	meta        objectMeta
	spec        podSpec
	ownerKind   string // "Pod", or the workload's kind
}

// TestExampleManifests applies each Kubernetes example's semantics: every
// document of every manifest parses and names its kind and name; a
// namespaced object names its namespace, which its file defines before
// it (or examples/runtimeclass.yaml, applied first, or kube-system); a pod
// run by the RuntimeClass belongs to a tenant of examples/policy.toml and
// the tenant admits what it asks for; its swift.io/ annotations pass the
// shim's parser; the RuntimeClass schedules on labelled Swift nodes; node
// agents (DaemonSets) tolerate every taint, are node-critical and run on
// Swift nodes; no pod asks for CDI devices by a pod annotation (containerd
// reads CDI annotations only from the container's, which the kubelet does
// not fill from the pod's); the CDI devices examples request are of the
// kind `swiftctl cdi generate` writes.
func TestExampleManifests(t *testing.T) {
	root := filepath.Join(repoRoot(t), "examples")
	polPath := filepath.Join(root, "policy.toml")
	polData, err := os.ReadFile(polPath)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse(polPath, polData)
	if err != nil {
		t.Fatal(err)
	}
	// The policy maps namespaces as the examples assume: pods of the
	// default namespace belong to no tenant (and are refused).
	for ns, want := range map[string]string{"team-a": "team-a", "team-a-dev": "team-a", "kube-system": "ops", "ops-x": "ops", "default": ""} {
		got := ""
		if tt := pol.HomeOf(ns); tt != nil {
			got = tt.Name
		}
		if got != want {
			t.Errorf("examples/policy.toml: namespace %q belongs to tenant %q, want %q", ns, got, want)
		}
	}
	// Its sizes are Kubernetes quantities: Gi is binary.
	if a := pol.Tenants["team-a"]; a == nil || a.Container.Memlock != 1<<30 || a.Node.Memlock != 16<<30 {
		t.Errorf("examples/policy.toml: tenant team-a = %+v, want container.memlock 1Gi and node.memlock 16Gi", a)
	}

	var files []string
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var rels []string
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		rels = append(rels, filepath.ToSlash(rel))
	}
	wantFiles := []string{"cdi/pod.yaml", "device-plugin/pod.yaml", "dra/claim.yaml", "k8s/node-agent-rbac.yaml", "k8s/podnet.yaml", "k8s/tenant-keys.yaml", "k8s/zygote-pod.yaml", "runtimeclass.yaml",
		"serverless/knative-service.yaml", "serverless/openwhisk-action.yaml"}
	if !slices.Equal(rels, wantFiles) {
		t.Errorf("examples/**/*.yaml = %q, want %q (update the checks for a new example)", rels, wantFiles)
	}

	// examples/runtimeclass.yaml is applied first: its namespaces are
	// there for every other example.
	base := map[string]bool{"kube-system": true}
	parsed := map[string][]manifest{}
	raw := map[string]string{}
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for j, doc := range documents(string(b)) {
			var m manifest
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Errorf("examples/%s document %d: %v", rels[i], j+1, err)
				continue
			}
			parsed[rels[i]] = append(parsed[rels[i]], m)
		}
		raw[rels[i]] = string(b)
		checkCommentOrder(t, rels[i], string(b), parsed[rels[i]])
	}
	for _, m := range parsed["runtimeclass.yaml"] {
		if m.Kind == "Namespace" {
			base[m.Metadata.Name] = true
		}
	}

	var pods []examplePod
	runtimeClasses := map[string]bool{}
	for _, rel := range rels {
		defined := map[string]bool{}
		for j, m := range parsed[rel] {
			where := "examples/" + rel + " " + m.Kind + " " + m.Metadata.Name
			if m.APIVersion == "" || m.Kind == "" || m.Metadata.Name == "" {
				t.Errorf("examples/%s document %d: no apiVersion, kind or metadata.name", rel, j+1)
				continue
			}
			switch {
			case m.Kind == "Namespace":
				defined[m.Metadata.Name] = true
			case clusterScoped[m.Kind]:
				if m.Metadata.Namespace != "" {
					t.Errorf("%s: a cluster-scoped %s names namespace %q", where, m.Kind, m.Metadata.Namespace)
				}
			case m.Metadata.Namespace == "":
				t.Errorf("%s: no metadata.namespace (it would land in the client's current namespace)", where)
			case definesNamespace(parsed[rel], m.Metadata.Namespace) && !defined[m.Metadata.Namespace]:
				t.Errorf("%s: namespace %q is defined after it in the file", where, m.Metadata.Namespace)
			case !defined[m.Metadata.Namespace] && !base[m.Metadata.Namespace] && !appliedFirst(rel, raw[rel], parsed, m.Metadata.Namespace):
				t.Errorf("%s: namespace %q is defined neither before it in the file, nor in examples/runtimeclass.yaml, "+
					"nor in an example its comments apply first", where, m.Metadata.Namespace)
			}
			// Only pods read swift.io/ annotations.
			for k := range m.Metadata.Annotations {
				if strings.HasPrefix(k, annotations.Prefix) && m.Kind != "Pod" {
					t.Errorf("%s: annotation %s on a %s (only pods' reach the shim)", where, k, m.Kind)
				}
			}
			switch m.Kind {
			case "RuntimeClass":
				runtimeClasses[m.Metadata.Name] = true
				want, ok := exampleRuntimeClasses[m.Metadata.Name]
				if !ok {
					t.Errorf("%s: a RuntimeClass this test does not know (add it to exampleRuntimeClasses)", where)
					continue
				}
				if rel != want.file {
					t.Errorf("%s: RuntimeClass %s belongs in examples/%s", where, m.Metadata.Name, want.file)
				}
				if m.Handler != want.handler {
					t.Errorf("%s: handler %q, want %q (the runtime entry swiftctl install containerd writes)", where, m.Handler, want.handler)
				}
				if m.Scheduling == nil || !reflect.DeepEqual(m.Scheduling.NodeSelector, want.nodeSelector) {
					t.Errorf("%s: scheduling = %+v, want nodeSelector %v (pods only on nodes labelled for it)", where, m.Scheduling, want.nodeSelector)
				}
			case "Pod":
				var s podSpec
				if err := json.Unmarshal(m.Spec, &s); err != nil {
					t.Errorf("%s: spec: %v", where, err)
					continue
				}
				pods = append(pods, examplePod{file: rel, where: where, namespace: m.Metadata.Namespace, meta: m.Metadata, spec: s, ownerKind: "Pod"})
			case "Service":
				if m.APIVersion != KnativeServing {
					continue
				}
				// a Knative Service: its revisions' pods are made from
				// its template, the one container named user-container
				// unless it is named
				var w workload
				if err := json.Unmarshal(m.Spec, &w); err != nil {
					t.Errorf("%s: spec: %v", where, err)
					continue
				}
				for i := range w.Template.Spec.Containers {
					if w.Template.Spec.Containers[i].Name == "" {
						w.Template.Spec.Containers[i].Name = "user-container"
					}
				}
				pods = append(pods, examplePod{file: rel, where: where + " (revision template)", namespace: m.Metadata.Namespace,
					meta: w.Template.Metadata, spec: w.Template.Spec, ownerKind: "KnativeService"})
			case "DaemonSet", "Deployment", "StatefulSet", "ReplicaSet", "Job":
				var w workload
				if err := json.Unmarshal(m.Spec, &w); err != nil {
					t.Errorf("%s: spec: %v", where, err)
					continue
				}
				pods = append(pods, examplePod{file: rel, where: where + " (pod template)", namespace: m.Metadata.Namespace,
					meta: w.Template.Metadata, spec: w.Template.Spec, ownerKind: m.Kind})
			case "ConfigMap":
				for k, v := range m.Data {
					s, _ := v.(string)
					if strings.HasSuffix(k, ".json") && !json.Valid([]byte(s)) {
						t.Errorf("%s: data %s is not valid JSON", where, k)
					}
				}
			}
		}
	}
	for name := range exampleRuntimeClasses {
		if !runtimeClasses[name] {
			t.Errorf("no example defines RuntimeClass %s", name)
		}
	}

	// What each pod run by the RuntimeClass resolves to: literal.
	wantTenants := map[string]string{
		"runtimeclass.yaml/rdma-worker":                  "team-a",
		"cdi/pod.yaml/worker-cdi":                        "team-a",
		"device-plugin/pod.yaml/worker-dp":               "team-a",
		"dra/claim.yaml/worker-dra":                      "team-a",
		"k8s/zygote-pod.yaml/trainer-0":                  "team-a",
		"k8s/podnet.yaml/rank-0":                         "team-a",
		"serverless/openwhisk-action.yaml/ow-action":     "team-a",
		"serverless/openwhisk-action.yaml/ow-echo":       "team-a",
		"serverless/knative-service.yaml/hello-echo":     "team-a",
		"serverless/knative-service.yaml/KnativeService": "team-a",
	}
	// The names a zygote pod's zygote and peers get, in its namespace: literal.
	wantZygotes := map[string]string{
		"k8s/zygote-pod.yaml/trainer-0":                  "trainer-0-worker.team-a, peers trainer-1-worker.team-a",
		"k8s/podnet.yaml/rank-0":                         "rank-0-worker.team-a, peers rank-1-worker.team-a",
		"serverless/openwhisk-action.yaml/ow-action":     "ow-action-action.team-a, peers ow-echo-echo.team-a",
		"serverless/openwhisk-action.yaml/ow-echo":       "ow-echo-echo.team-a, peers ow-action-action.team-a",
		"serverless/knative-service.yaml/hello-echo":     "hello-echo-echo.team-a, peers hello-rdma.team-a",
		"serverless/knative-service.yaml/KnativeService": "hello-rdma.team-a, peers hello-echo-echo.team-a",
	}
	gotTenants, gotZygotes := map[string]string{}, map[string]string{}
	cdiDevices := 0
	for _, p := range pods {
		checkPod(t, p, pol, gotTenants, gotZygotes, &cdiDevices)
	}
	if !reflect.DeepEqual(gotTenants, wantTenants) {
		t.Errorf("pods run by RuntimeClass %q and their tenants = %v, want %v", exampleRuntimeClass, gotTenants, wantTenants)
	}
	if !reflect.DeepEqual(gotZygotes, wantZygotes) {
		t.Errorf("zygote pods and their zygotes' names = %v, want %v", gotZygotes, wantZygotes)
	}
	if cdiDevices == 0 {
		t.Errorf("no example requests a CDI device of kind %s", cdispec.Kind)
	}
}

// appliedFirst tells whether another example that defines namespace ns
// is applied (`kubectl apply -f NAME` in a comment) before rel itself in
// rel's comments.
func appliedFirst(rel, data string, parsed map[string][]manifest, ns string) bool {
	self := -1
	lines := strings.Split(data, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "#") && strings.Contains(l, "kubectl apply -f "+filepath.Base(rel)) {
			self = i
			break
		}
	}
	for other, ms := range parsed {
		if other == rel || !definesNamespace(ms, ns) {
			continue
		}
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), "#") && strings.Contains(l, "kubectl apply -f "+filepath.Base(other)) &&
				filepath.Dir(other) == filepath.Dir(rel) && (self < 0 || i < self) {
				return true
			}
		}
	}
	return false
}

func definesNamespace(ms []manifest, ns string) bool {
	for _, m := range ms {
		if m.Kind == "Namespace" && m.Metadata.Name == ns {
			return true
		}
	}
	return false
}

func checkPod(t *testing.T, p examplePod, pol *policy.Policy, tenants, zygotes map[string]string, cdiDevices *int) {
	t.Helper()
	for k, v := range p.meta.Annotations {
		if strings.HasPrefix(k, "cdi.k8s.io/") {
			t.Errorf("%s: pod annotation %s=%q: containerd reads CDI annotations only from the container's, and the kubelet does not copy pod annotations there; request the device through a device plugin's resource or a DRA ResourceClaim", p.where, k, v)
		}
	}
	opts, err := annotations.Parse(p.meta.Annotations)
	if err != nil {
		t.Errorf("%s: %v", p.where, err)
		return
	}
	rc := p.spec.RuntimeClassName
	if rc == "" && len(opts.Given) > 0 {
		t.Errorf("%s: swift.io/ annotations %v without runtimeClassName %q: no other runtime reads them", p.where, opts.Given, exampleRuntimeClass)
	}
	if _, ok := exampleRuntimeClasses[rc]; rc != "" && !ok {
		t.Errorf("%s: runtimeClassName %q is none of the examples' RuntimeClasses", p.where, rc)
	}
	if rc == "swift-podnet" && p.spec.HostNetwork {
		t.Errorf("%s: hostNetwork with RuntimeClass %s, whose pods are on the network of its runtime entry", p.where, rc)
	}
	if p.ownerKind == "DaemonSet" {
		if !slices.Contains(p.spec.Tolerations, toleration{Operator: "Exists"}) {
			t.Errorf("%s: tolerations %+v, want {operator: Exists} (a node agent tolerates every taint)", p.where, p.spec.Tolerations)
		}
		if p.spec.PriorityClassName != nodeCritical {
			t.Errorf("%s: priorityClassName %q, want %s", p.where, p.spec.PriorityClassName, nodeCritical)
		}
		if !reflect.DeepEqual(p.spec.NodeSelector, map[string]string{swiftNodeLabel: "true"}) {
			t.Errorf("%s: nodeSelector %v, want %s: \"true\" (the Swift nodes)", p.where, p.spec.NodeSelector, swiftNodeLabel)
		}
	}
	// A CDI spec path handed to a container is the one swiftctl cdi generate writes.
	spec := filepath.Join(cdispec.DefaultDir, cdi.GenerateSpecName(cdispec.Vendor, cdispec.Class)+".yaml")
	for _, c := range append(p.spec.Containers, p.spec.InitContainers...) {
		for _, a := range append(c.Command, c.Args...) {
			if strings.HasPrefix(a, cdispec.DefaultDir+"/") && a != spec {
				t.Errorf("%s: container %s reads CDI spec %s; swiftctl cdi generate writes %s", p.where, c.Name, a, spec)
			}
		}
	}
	if _, ok := exampleRuntimeClasses[rc]; !ok {
		return
	}
	key := p.file + "/" + p.meta.Name
	if p.ownerKind != "Pod" {
		key = p.file + "/" + p.ownerKind
	}
	ns := p.namespace
	if ns == "" {
		ns = "default" // where kubectl puts it without a context namespace
	}
	tenant, err := pol.Resolve(policy.Caller{CRI: true, Namespace: ns}, opts.Tenant)
	if err != nil {
		t.Errorf("%s: pod of namespace %q under examples/policy.toml: %v", p.where, ns, err)
		return
	}
	tenants[key] = tenant.Name
	if _, err := tenant.Admit(opts, exampleNodeDevices); err != nil {
		t.Errorf("%s: tenant %q refuses the pod: %v", p.where, tenant.Name, err)
	}
	names := []string{}
	for _, c := range p.spec.Containers {
		names = append(names, c.Name)
	}
	if opts.ZygoteContainer != "" && !slices.Contains(names, opts.ZygoteContainer) {
		t.Errorf("%s: %s=%q names no container of the pod (%v)", p.where, annotations.ZygoteContainer, opts.ZygoteContainer, names)
	}
	if opts.Zygote != nil && *opts.Zygote && len(names) > 0 {
		ctr := opts.ZygoteContainer
		if ctr == "" {
			ctr = names[0]
		}
		cri := map[string]string{annotations.CRISandboxName: p.meta.Name, annotations.CRIContainerName: ctr}
		pc, err := inject.NewPoolConfig(inject.DefaultName("", cri), opts).InNamespace(ns)
		if err != nil {
			t.Errorf("%s: the zygote's names in namespace %s: %v", p.where, ns, err)
		} else {
			var peers []string
			for _, pr := range pc.Peers {
				peers = append(peers, pr.Name)
			}
			zygotes[key] = pc.Name + ", peers " + strings.Join(peers, " ")
		}
	}
	// CDI devices through a device plugin that advertises one resource per
	// device of the spec ("swift.io/rdma-<device>") and answers with the
	// CDI device "swift.io/rdma=<device>".
	for _, c := range p.spec.Containers {
		for r := range c.Resources.Limits {
			dev, ok := strings.CutPrefix(r, cdispec.Kind+"-")
			if !ok {
				continue
			}
			name := cdispec.Name(dev)
			vendor, class, _, err := parser.ParseQualifiedName(name)
			if err != nil || vendor+"/"+class != cdispec.Kind || !annotations.IsDeviceName(dev) {
				t.Errorf("%s: resource %s: %q is not a %s device (%v)", p.where, r, name, cdispec.Kind, err)
				continue
			}
			if err := tenant.AdmitAllocated([]string{dev}); err != nil {
				t.Errorf("%s: resource %s: %v", p.where, r, err)
			}
			*cdiDevices++
		}
	}
}

var kubectlNS = regexp.MustCompile(`kubectl\b.*(?:-n|--namespace)[ =]([a-z0-9-]+)`)

// checkCommentOrder: the commands a manifest's comments give apply the
// manifest (which creates its namespaces) before anything else goes into
// those namespaces.
func checkCommentOrder(t *testing.T, rel, data string, ms []manifest) {
	t.Helper()
	applied := -1
	base := filepath.Base(rel)
	lines := strings.Split(data, "\n")
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "#") && strings.Contains(line, "kubectl apply -f") && strings.Contains(line, base) {
			applied = i
			break
		}
	}
	for i, line := range lines {
		s := strings.TrimSpace(line)
		if !strings.HasPrefix(s, "#") {
			continue
		}
		m := kubectlNS.FindStringSubmatch(s)
		if m == nil || !definesNamespace(ms, m[1]) {
			continue
		}
		if applied < 0 || i < applied {
			t.Errorf("examples/%s:%d: %q uses namespace %s before `kubectl apply -f %s` creates it", rel, i+1, s, m[1], base)
		}
	}
}
