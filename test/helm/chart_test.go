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
	batchv1 "k8s.io/api/batch/v1"
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
	"--set", "image.pullSecrets[0].name=regcred",
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
		"ClusterRole/swift-swift-install", "ClusterRole/swift-swift-node",
		"ClusterRoleBinding/swift-swift-install", "ClusterRoleBinding/swift-swift-node",
		"DaemonSet/swift-install", "DaemonSet/swift-node",
		"DeviceClass/swift-rdma", "Job/swift-uninstall", "Role/swift-install", "Role/swift-uninstall",
		"RoleBinding/swift-install", "RoleBinding/swift-uninstall", "RuntimeClass/swift", "Service/swift-node-metrics",
		"ServiceAccount/swift-install", "ServiceAccount/swift-node", "ServiceAccount/swift-uninstall",
		"ValidatingAdmissionPolicy/swift-swift-install-label", "ValidatingAdmissionPolicy/swift-swift-node-slices",
		"ValidatingAdmissionPolicyBinding/swift-swift-install-label", "ValidatingAdmissionPolicyBinding/swift-swift-node-slices",
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
	if p.ImagePullSecrets != nil {
		t.Errorf("imagePullSecrets %v by default, want none", p.ImagePullSecrets)
	}
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
	for _, k := range []string{"DaemonSet/swift-node", "DaemonSet/swift-install"} {
		d := decode[appsv1.DaemonSet](t, objs, k)
		if want := []corev1.LocalObjectReference{{Name: "regcred"}}; !reflect.DeepEqual(d.Spec.Template.Spec.ImagePullSecrets, want) {
			t.Errorf("%s imagePullSecrets %v, want %v", k, d.Spec.Template.Spec.ImagePullSecrets, want)
		}
	}
	if j := decode[batchv1.Job](t, objs, "Job/swift-uninstall"); len(j.Spec.Template.Spec.ImagePullSecrets) != 1 {
		t.Errorf("uninstall Job imagePullSecrets %v, want regcred", j.Spec.Template.Spec.ImagePullSecrets)
	}
	args := strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " ")
	for _, a := range []string{"--policy-configmap=swift-system/swift-policy", "--keys-secret=swift-system/swift-tenant-keys"} {
		if !strings.Contains(args, a) {
			t.Errorf("agent args %q lack %s", args, a)
		}
	}
}

// TestInstaller: the installer DaemonSet runs swift-node install with
// the chart's runtime entry, node config and label; its RBAC is its node
// and its own DaemonSet; helm uninstall's pre-delete hook deletes that
// DaemonSet and waits.
func TestInstaller(t *testing.T) {
	objs := objects(t, "--set", "installer.prefix=/opt/swift", "--set", "installer.restartCommand=/usr/local/sbin/restart-ctrd now",
		"--set", "installer.waitFor[0]=/etc/swift/config.toml", "--set", "runtimeClass.handler=swift-rdma")
	ds := decode[appsv1.DaemonSet](t, objs, "DaemonSet/swift-install")
	p := ds.Spec.Template.Spec
	if !p.HostPID || !p.HostNetwork || p.ServiceAccountName != "swift-install" || p.TerminationGracePeriodSeconds == nil || *p.TerminationGracePeriodSeconds != 180 {
		t.Errorf("installer pod: hostPID %v hostNetwork %v serviceAccount %q grace %v", p.HostPID, p.HostNetwork, p.ServiceAccountName, p.TerminationGracePeriodSeconds)
	}
	c := p.Containers[0]
	wantArgs := []string{"--node-name=$(NODE_NAME)", "--daemonset=swift-system/swift-install", "--prefix=/opt/swift",
		"--state-dir=/var/lib/swift-install", "--containerd-config=/etc/containerd/config.toml", "--runtime-name=swift-rdma",
		"--swift-config=/etc/swift/config.toml", "--restart-command=/usr/local/sbin/restart-ctrd now",
		"--node-label=swift.io/runtime=true", "--uninstall-timeout=150s", "--wait-for=/etc/swift/config.toml"}
	if !reflect.DeepEqual(c.Command, []string{"/usr/local/bin/swift-node", "install"}) || !reflect.DeepEqual(c.Args, wantArgs) {
		t.Errorf("installer: command %v args %v; want swift-node install %v", c.Command, c.Args, wantArgs)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil ||
		!reflect.DeepEqual(c.ReadinessProbe.Exec.Command, []string{"/usr/local/bin/swift-node", "install", "--probe"}) {
		t.Errorf("installer readiness probe %+v", c.ReadinessProbe)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged || len(p.Volumes) != 0 {
		t.Errorf("installer: privileged %+v, volumes %v (none: the node's files through /proc/1/root)", c.SecurityContext, p.Volumes)
	}
	cr := decode[rbacv1.ClusterRole](t, objs, "ClusterRole/swift-swift-install")
	if want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}}}; !reflect.DeepEqual(cr.Rules, want) {
		t.Errorf("installer ClusterRole %+v, want %+v", cr.Rules, want)
	}
	for key, verbs := range map[string][]string{"Role/swift-install": {"get"}, "Role/swift-uninstall": {"get", "delete"}} {
		r := decode[rbacv1.Role](t, objs, key)
		want := []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: []string{"swift-install"}, Verbs: verbs}}
		if !reflect.DeepEqual(r.Rules, want) {
			t.Errorf("%s rules %+v, want %+v", key, r.Rules, want)
		}
	}
	job := decode[batchv1.Job](t, objs, "Job/swift-uninstall")
	if a := job.Annotations; a["helm.sh/hook"] != "pre-delete" || a["helm.sh/hook-weight"] != "0" {
		t.Errorf("uninstall Job annotations %v: want a pre-delete hook after its RBAC", a)
	}
	for _, k := range []string{"ServiceAccount/swift-uninstall", "Role/swift-uninstall", "RoleBinding/swift-uninstall"} {
		var m struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(objs[k], &m); err != nil || m.Metadata.Annotations["helm.sh/hook"] != "pre-delete" || m.Metadata.Annotations["helm.sh/hook-weight"] != "-5" {
			t.Errorf("%s: %v annotations %v: want a pre-delete hook before the Job", k, err, m.Metadata.Annotations)
		}
	}
	jc := job.Spec.Template.Spec.Containers[0]
	if want := []string{"--daemonset=swift-system/swift-install", "--timeout=240s"}; !reflect.DeepEqual(jc.Args, want) ||
		!reflect.DeepEqual(jc.Command, []string{"/usr/local/bin/swift-node", "uninstall-hook"}) {
		t.Errorf("uninstall Job: %v %v, want swift-node uninstall-hook %v", jc.Command, jc.Args, want)
	}
	if sc := job.Spec.Template.Spec.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65534 {
		t.Errorf("uninstall Job runs as %+v, want 65534", sc)
	}
	vap := string(objs["ValidatingAdmissionPolicy/swift-swift-install-label"])
	for _, want := range []string{`request.userInfo.username == "system:serviceaccount:swift-system:swift-install"`,
		`k == "swift.io/runtime"`, "object.spec == oldObject.spec", "object.metadata.?finalizers.orValue([]) == oldObject.metadata.?finalizers.orValue([])",
		"object.metadata.?ownerReferences.orValue([]) == oldObject.metadata.?ownerReferences.orValue([])"} {
		if !strings.Contains(vap, want) {
			t.Errorf("installer's ValidatingAdmissionPolicy lacks %q:\n%s", want, vap)
		}
	}

	objs = objects(t, "--set", "installer.enabled=false")
	for _, k := range keys(objs) {
		if strings.Contains(k, "install") {
			t.Errorf("installer.enabled=false rendered %s", k)
		}
	}
}

// TestRefuses: values that would install something wrong fail the render
// with a message naming the value.
func TestRefuses(t *testing.T) {
	for _, tc := range []struct {
		set, msg string
	}{
		{"tenantKeys.Team_A=2026-12 00", `tenantKeys: "Team_A" is not a tenant name (a DNS label)`},
		{"installer.prefix=opt/swift", `installer.prefix: "opt/swift" is not an absolute, clean path on the node`},
		{"installer.terminationGracePeriodSeconds=30", "installer.terminationGracePeriodSeconds: at least 60"},
		{"installer.containerdConfig=/etc/containerd/../config.toml", `installer.containerdConfig: "/etc/containerd/../config.toml" is not an absolute, clean path`},
	} {
		out, err := helm(t, "template", "swift", chartDir(t), "--set-string", tc.set)
		if err == nil || !strings.Contains(out, tc.msg) {
			t.Errorf("--set-string %s: %v\n%s", tc.set, err, out)
		}
	}
}
