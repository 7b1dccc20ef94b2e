//go:build e2e

// Package helm tests the chart deploy/helm/swift with Helm itself
// ($SWIFT_HELM_BIN, which make deps builds): helm lint, and what helm
// template renders, object by object, against literal expectations.
package helm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"
)

func chartDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy", "helm", "swift")
}

func helmBin(t *testing.T) string {
	h := os.Getenv("SWIFT_HELM_BIN")
	if h == "" {
		t.Fatal("SWIFT_HELM_BIN is not set: the path of a helm v4 binary (make deps builds one into /var/cache/swift-build/k8s-<version>/helm; make helm sets it)")
	}
	if _, err := os.Stat(h); err != nil {
		t.Fatalf("SWIFT_HELM_BIN: %v (make deps builds it)", err)
	}
	return h
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// full are values that turn every optional object on.
var full = []string{
	"--set-string", "policy=local_tenant = \"ops\"\n[tenants.ops]\nnamespaces = [\"ops-*\"]\n",
	"--set-string", "tenantKeys.team-a=2026-12 0011",
	"--set-string", "tenantKeys.team-c=2026-11 2233",
	"--set", "metrics.serviceMonitor.enabled=true",
}

func TestLint(t *testing.T) {
	for name, args := range map[string][]string{"defaults": nil, "full": full} {
		out, err := helm(t, append([]string{"lint", "--strict", chartDir(t)}, args...)...)
		if err != nil || !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
			t.Errorf("helm lint --strict (%s): %v\n%s", name, err, out)
		}
	}
}

// objects renders the chart as release "swift" in swift-system and
// returns its objects by "Kind/name".
func objects(t *testing.T, args ...string) map[string][]byte {
	t.Helper()
	out, err := helm(t, append([]string{"template", "swift", chartDir(t), "--namespace", "swift-system"}, args...)...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objs := map[string][]byte{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("a rendered document does not parse: %v\n%s", err, doc)
		}
		if meta.Kind == "" {
			continue
		}
		objs[meta.Kind+"/"+meta.Metadata.Name] = []byte(doc)
	}
	return objs
}

func keys(m map[string][]byte) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}

func decode[T any](t *testing.T, objs map[string][]byte, key string) T {
	t.Helper()
	var v T
	b, ok := objs[key]
	if !ok {
		t.Fatalf("no %s rendered (have %v)", key, keys(objs))
	}
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}

func TestDefaults(t *testing.T) {
	objs := objects(t)
	want := []string{
		"ClusterRole/swift-swift-node", "ClusterRoleBinding/swift-swift-node", "DaemonSet/swift-node",
		"DeviceClass/swift-rdma", "RuntimeClass/swift", "Service/swift-node-metrics", "ServiceAccount/swift-node",
		"ValidatingAdmissionPolicy/swift-swift-node-slices", "ValidatingAdmissionPolicyBinding/swift-swift-node-slices",
	}
	if got := keys(objs); !reflect.DeepEqual(got, want) {
		t.Errorf("objects:\n got %v\nwant %v", got, want)
	}
	rc := decode[nodev1.RuntimeClass](t, objs, "RuntimeClass/swift")
	if rc.Handler != "swift" || rc.Scheduling == nil || !reflect.DeepEqual(rc.Scheduling.NodeSelector, map[string]string{"swift.io/runtime": "true"}) {
		t.Errorf("RuntimeClass: handler %q scheduling %+v; want handler swift, nodeSelector swift.io/runtime=true", rc.Handler, rc.Scheduling)
	}
	dc := decode[resourcev1.DeviceClass](t, objs, "DeviceClass/swift-rdma")
	if len(dc.Spec.Selectors) != 1 || dc.Spec.Selectors[0].CEL == nil || dc.Spec.Selectors[0].CEL.Expression != `device.driver == "rdma.swift.io"` {
		t.Errorf("DeviceClass selectors %+v: want the one CEL device.driver == \"rdma.swift.io\"", dc.Spec.Selectors)
	}
	ds := decode[appsv1.DaemonSet](t, objs, "DaemonSet/swift-node")
	p := ds.Spec.Template.Spec
	if !p.HostNetwork || !p.HostPID || p.PriorityClassName != "system-node-critical" || p.ServiceAccountName != "swift-node" {
		t.Errorf("agent pod: hostNetwork %v hostPID %v priority %q serviceAccount %q", p.HostNetwork, p.HostPID, p.PriorityClassName, p.ServiceAccountName)
	}
	if want := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}; !reflect.DeepEqual(p.Tolerations, want) {
		t.Errorf("tolerations %+v, want %+v (every taint)", p.Tolerations, want)
	}
	if p.NodeSelector != nil {
		t.Errorf("nodeSelector %v, want none: the agent installs the policy before the node gets the RuntimeClass's label", p.NodeSelector)
	}
	if c := p.Containers[0]; c.LivenessProbe != nil || c.ReadinessProbe == nil {
		t.Errorf("probes: liveness %+v readiness %+v; want readiness only (a taken metrics port must not restart the driver)", c.LivenessProbe, c.ReadinessProbe)
	}
	c := p.Containers[0]
	wantArgs := []string{"--node-name=$(NODE_NAME)", "--config=/etc/swift/config.toml", "--cdi-dir=/etc/cdi",
		"--plugin-dir=/var/lib/kubelet/plugins/rdma.swift.io", "--registry-dir=/var/lib/kubelet/plugins_registry",
		"--rescan=10s", "--metrics-addr=:9478"}
	if c.Image != "swift-rdma/swift:0.1.0" || !reflect.DeepEqual(c.Command, []string{"/usr/local/bin/swift-node"}) || !reflect.DeepEqual(c.Args, wantArgs) {
		t.Errorf("agent container: image %q command %v args %v; want swift-rdma/swift:0.1.0 /usr/local/bin/swift-node %v", c.Image, c.Command, c.Args, wantArgs)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("agent container not privileged: %+v", c.SecurityContext)
	}
	paths := map[string]string{}
	for _, v := range p.Volumes {
		paths[v.Name] = v.HostPath.Path
	}
	wantPaths := map[string]string{"plugins": "/var/lib/kubelet/plugins", "registry": "/var/lib/kubelet/plugins_registry",
		"cdi": "/etc/cdi", "state": "/var/lib/swift", "config": "/etc/swift", "containerd": "/run/containerd", "infiniband": "/dev/infiniband"}
	if !reflect.DeepEqual(paths, wantPaths) {
		t.Errorf("host paths %v, want %v", paths, wantPaths)
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath != wantPaths[m.Name] {
			t.Errorf("mount %s at %s: want the host's path %s (the ledger names bundles by host path)", m.Name, m.MountPath, wantPaths[m.Name])
		}
		if m.Name == "containerd" && !m.ReadOnly {
			t.Errorf("containerd's state mounted writable")
		}
	}
	cr := decode[rbacv1.ClusterRole](t, objs, "ClusterRole/swift-swift-node")
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
	}
	if !reflect.DeepEqual(cr.Rules, wantRules) {
		t.Errorf("ClusterRole rules %+v, want %+v", cr.Rules, wantRules)
	}
}

func TestFull(t *testing.T) {
	objs := objects(t, full...)
	for _, k := range []string{"ConfigMap/swift-policy", "Secret/swift-tenant-keys", "Role/swift-node", "RoleBinding/swift-node", "ServiceMonitor/swift-node"} {
		if _, ok := objs[k]; !ok {
			t.Errorf("no %s rendered", k)
		}
	}
	cm := decode[corev1.ConfigMap](t, objs, "ConfigMap/swift-policy")
	if want := map[string]string{"policy.toml": "local_tenant = \"ops\"\n[tenants.ops]\nnamespaces = [\"ops-*\"]\n"}; !reflect.DeepEqual(cm.Data, want) {
		t.Errorf("policy ConfigMap data %q, want %q", cm.Data, want)
	}
	sec := decode[corev1.Secret](t, objs, "Secret/swift-tenant-keys")
	if want := map[string]string{"team-a.keys": "2026-12 0011\n", "team-c.keys": "2026-11 2233\n"}; !reflect.DeepEqual(sec.StringData, want) {
		t.Errorf("keys Secret %q, want %q", sec.StringData, want)
	}
	role := decode[rbacv1.Role](t, objs, "Role/swift-node")
	wantRules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"swift-policy"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"swift-tenant-keys"}, Verbs: []string{"get", "list", "watch"}},
	}
	if !reflect.DeepEqual(role.Rules, wantRules) {
		t.Errorf("Role rules %+v, want %+v (the two objects by name only)", role.Rules, wantRules)
	}
	ds := decode[appsv1.DaemonSet](t, objs, "DaemonSet/swift-node")
	args := strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " ")
	for _, a := range []string{"--policy-configmap=swift-system/swift-policy", "--keys-secret=swift-system/swift-tenant-keys"} {
		if !strings.Contains(args, a) {
			t.Errorf("agent args %q lack %s", args, a)
		}
	}
}

// TestRefuses: values that would install something wrong fail the render
// with a message naming the value.
func TestRefuses(t *testing.T) {
	out, err := helm(t, "template", "swift", chartDir(t), "--set-string", "tenantKeys.Team_A=2026-12 00")
	if err == nil || !strings.Contains(out, `tenantKeys: "Team_A" is not a tenant name (a DNS label)`) {
		t.Errorf("a tenant name that is no DNS label: %v\n%s", err, out)
	}
}
