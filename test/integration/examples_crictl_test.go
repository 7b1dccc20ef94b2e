package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/swift-rdma/swift-containerd/annotations"
	"github.com/swift-rdma/swift-containerd/install"
	"github.com/swift-rdma/swift-containerd/policy"
)

// The CRI configs crictl reads (k8s.io/cri-api runtime/v1
// PodSandboxConfig and ContainerConfig, with the JSON field names of their
// Go types), as far as the examples use them. crictl ignores a key it
// does not know, so a misspelt one (namespaceOptions for
// namespace_options) would silently drop the setting: the test decodes
// with unknown keys refused.
type criPodConfig struct {
	Metadata struct {
		Name      string `json:"name"`
		UID       string `json:"uid"`
		Namespace string `json:"namespace"`
		Attempt   uint32 `json:"attempt"`
	} `json:"metadata"`
	Hostname     string            `json:"hostname"`
	LogDirectory string            `json:"log_directory"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	Linux        *criLinux         `json:"linux"`
}

type criContainerConfig struct {
	Metadata struct {
		Name    string `json:"name"`
		Attempt uint32 `json:"attempt"`
	} `json:"metadata"`
	Image struct {
		Image string `json:"image"`
	} `json:"image"`
	Command     []string          `json:"command"`
	Args        []string          `json:"args"`
	WorkingDir  string            `json:"working_dir"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	LogPath     string            `json:"log_path"`
	Linux       *criLinux         `json:"linux"`
}

type criLinux struct {
	SecurityContext *struct {
		NamespaceOptions *struct {
			Network int `json:"network"`
			Pid     int `json:"pid"`
			Ipc     int `json:"ipc"`
		} `json:"namespace_options"`
	} `json:"security_context"`
}

// CRI's NamespaceMode values.
const (
	criNamespacePod       = 0
	criNamespaceContainer = 1
	criNamespaceNode      = 2
)

// namespaces returns the network and PID namespace modes (POD, 0, when unset).
func (l *criLinux) namespaces() (network, pid int) {
	if l == nil || l.SecurityContext == nil || l.SecurityContext.NamespaceOptions == nil {
		return criNamespacePod, criNamespacePod
	}
	o := l.SecurityContext.NamespaceOptions
	return o.Network, o.Pid
}

func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// quickstartScenario is the VM scenario that follows the README's
// quickstart on an rxe node, the crictl commands among them.
const quickstartScenario = "test/vm/guest/quickstart.sh"

var crictlExample = regexp.MustCompile(`examples/crictl/[A-Za-z0-9._-]+`)

// TestExampleCrictl: examples/crictl is the pod of
// examples/runtimeclass.yaml as crictl's CRI configs (its namespace,
// annotations, container name, image and command; on the node's network,
// which soft-RoCE needs, with a PID namespace per container as the kubelet
// makes them); its namespace maps to a tenant of examples/policy.toml that
// admits what it asks for, and the same pod in namespace default is
// refused with the message the README quotes; the README's crictl
// commands name exactly these files and the runtime entry install
// writes, and the quickstart VM scenario runs those same commands.
func TestExampleCrictl(t *testing.T) {
	repo := repoRoot(t)
	root := filepath.Join(repo, "examples")
	var pod criPodConfig
	var ctr criContainerConfig
	decodeStrict(t, filepath.Join(root, "crictl", "pod.json"), &pod)
	decodeStrict(t, filepath.Join(root, "crictl", "container.json"), &ctr)

	// the pod of runtimeclass.yaml
	b, err := os.ReadFile(filepath.Join(root, "runtimeclass.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k8sPod *manifest
	var k8sSpec struct {
		Containers []struct {
			Name    string   `json:"name"`
			Image   string   `json:"image"`
			Command []string `json:"command"`
			Args    []string `json:"args"`
		} `json:"containers"`
	}
	for _, doc := range documents(string(b)) {
		var m manifest
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("examples/runtimeclass.yaml: %v", err)
		}
		if m.Kind == "Pod" {
			k8sPod = &m
			if err := json.Unmarshal(m.Spec, &k8sSpec); err != nil {
				t.Fatalf("examples/runtimeclass.yaml pod spec: %v", err)
			}
		}
	}
	if k8sPod == nil || len(k8sSpec.Containers) != 1 {
		t.Fatalf("examples/runtimeclass.yaml: want one pod with one container")
	}
	if pod.Metadata.Name != k8sPod.Metadata.Name || pod.Metadata.Namespace != k8sPod.Metadata.Namespace || pod.Metadata.UID == "" {
		t.Errorf("examples/crictl/pod.json: metadata %+v, want name %q, namespace %q and a uid (as runtimeclass.yaml's pod)",
			pod.Metadata, k8sPod.Metadata.Name, k8sPod.Metadata.Namespace)
	}
	if !reflect.DeepEqual(pod.Annotations, k8sPod.Metadata.Annotations) {
		t.Errorf("examples/crictl/pod.json: annotations %v, want runtimeclass.yaml's pod's %v", pod.Annotations, k8sPod.Metadata.Annotations)
	}
	kc := k8sSpec.Containers[0]
	if ctr.Metadata.Name != kc.Name || ctr.Image.Image != kc.Image || !slices.Equal(ctr.Command, kc.Command) || !slices.Equal(ctr.Args, kc.Args) {
		t.Errorf("examples/crictl/container.json: %s image %s command %q args %q, want runtimeclass.yaml's %s image %s command %q args %q",
			ctr.Metadata.Name, ctr.Image.Image, ctr.Command, ctr.Args, kc.Name, kc.Image, kc.Command, kc.Args)
	}
	for what, l := range map[string]*criLinux{"pod.json": pod.Linux, "container.json": ctr.Linux} {
		if n, p := l.namespaces(); n != criNamespaceNode || p != criNamespaceContainer {
			t.Errorf("examples/crictl/%s: namespace_options network %d, pid %d; want network %d (NODE: the node's network, which soft-RoCE needs) and pid %d (CONTAINER, as the kubelet makes them)",
				what, n, p, criNamespaceNode, criNamespaceContainer)
		}
	}

	// its tenant under examples/policy.toml, as the shim resolves it
	polData, err := os.ReadFile(filepath.Join(root, "policy.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// the path a node reads it from, which the refusal names
	pol, err := policy.Parse("/etc/swift/policy.toml", polData)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := annotations.Parse(pod.Annotations)
	if err != nil {
		t.Fatalf("examples/crictl/pod.json: %v", err)
	}
	tenant, err := pol.Resolve(policy.Caller{CRI: true, Namespace: pod.Metadata.Namespace}, opts.Tenant)
	if err != nil {
		t.Fatalf("examples/crictl/pod.json: namespace %q under examples/policy.toml: %v", pod.Metadata.Namespace, err)
	}
	if tenant.Name != "team-a" {
		t.Errorf("examples/crictl/pod.json: tenant %q, want team-a", tenant.Name)
	}
	if _, err := tenant.Admit(opts, exampleNodeDevices); err != nil {
		t.Errorf("examples/crictl/pod.json: tenant %q refuses the pod: %v", tenant.Name, err)
	}
	readmeBytes, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(readmeBytes)
	_, err = pol.Resolve(policy.Caller{CRI: true, Namespace: "default"}, opts.Tenant)
	if err == nil {
		t.Errorf("the pod in namespace default is admitted by examples/policy.toml; the README says it is refused")
	} else {
		msg, _, _ := strings.Cut(err.Error(), ": permission denied")
		if !strings.Contains(strings.Join(strings.Fields(readme), " "), msg) {
			t.Errorf("README.md does not quote the refusal of the pod in namespace default: %s", msg)
		}
	}

	// the README's crictl commands: these files, the runtime entry
	// install writes, and the same command in the container as kubectl's
	runp := "crictl runp --runtime " + install.DefaultRuntimeName + " examples/crictl/"
	block := fencedBlockWith(readme, runp)
	if block == nil {
		t.Fatalf("README.md: no ```sh block with `%s...` (the runtime entry swiftctl install containerd writes)", runp)
	}
	scenario, err := os.ReadFile(filepath.Join(repo, quickstartScenario))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, l := range block {
		cmd, _, _ := strings.Cut(l, "  #")
		if cmd = strings.TrimSpace(cmd); cmd != "" && !strings.HasPrefix(cmd, "#") {
			cmds = append(cmds, cmd)
		}
	}
	for _, c := range cmds {
		// the whole command: what precedes and follows it in the
		// scenario is a line's start or end, a blank, $( or )
		whole := regexp.MustCompile(`(?m)(^|[\s(])` + regexp.QuoteMeta(c) + `($|[\s);|&])`)
		if !whole.Match(scenario) {
			t.Errorf("the README's command %q is not in %s (the scenario runs the README's commands as they are)", c, quickstartScenario)
		}
	}
	kubectlExec := regexp.MustCompile(`(?m)^kubectl -n team-a exec rdma-worker -- (sh -c '.*')$`).FindStringSubmatch(readme)
	if kubectlExec == nil {
		t.Errorf("README.md: no `kubectl -n team-a exec rdma-worker -- sh -c '...'`")
	} else if !slices.ContainsFunc(cmds, func(c string) bool { return strings.HasSuffix(c, " "+kubectlExec[1]) }) {
		t.Errorf("README.md: crictl exec does not run kubectl exec's %s: %q", kubectlExec[1], cmds)
	}
	files, _ := filepath.Glob(filepath.Join(root, "crictl", "*"))
	var want []string
	for _, f := range files {
		rel, _ := filepath.Rel(repo, f)
		want = append(want, filepath.ToSlash(rel))
	}
	sort.Strings(want)
	named := func(s string) []string {
		m := crictlExample.FindAllString(s, -1)
		sort.Strings(m)
		return slices.Compact(m)
	}
	if got := named(strings.Join(cmds, "\n")); !slices.Equal(got, want) {
		t.Errorf("README.md's crictl commands name %q, want every file of examples/crictl: %q", got, want)
	}
	if got := named(string(scenario)); !slices.Equal(got, want) {
		t.Errorf("%s names %q, want the README's examples/crictl files %q", quickstartScenario, got, want)
	}
	for _, f := range want {
		if !strings.Contains(readme, "]("+f+")") {
			t.Errorf("README.md does not link %s", f)
		}
	}
}

// fencedBlockWith returns the lines of the first ```sh block of md that
// has a line containing s.
func fencedBlockWith(md, s string) []string {
	var block []string
	in := false
	for _, l := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```sh":
			in, block = true, nil
		case in && strings.TrimSpace(l) == "```":
			in = false
			for _, b := range block {
				if strings.Contains(b, s) {
					return block
				}
			}
		case in:
			block = append(block, l)
		}
	}
	return nil
}
