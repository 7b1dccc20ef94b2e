package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/swift-rdma/swift-containerd/internal/version"
	"github.com/swift-rdma/swift-containerd/ledger"
)

// jsonOf runs swiftctl with args, wants exit code want and nothing on
// stderr, and unmarshals stdout (one JSON document) into v.
func jsonOf(t *testing.T, want int, v any, args ...string) {
	t.Helper()
	so, se, code := swiftctlExit(t, args...)
	if code != want || se != "" {
		t.Fatalf("swiftctl %q: exit %d (want %d), stderr %q, stdout %q", args, code, want, se, so)
	}
	if err := json.Unmarshal([]byte(so), v); err != nil {
		t.Fatalf("swiftctl %q: %v\n%s", args, err, so)
	}
}

func TestVersionJSON(t *testing.T) {
	defer func(v string) { version.Version = v }(version.Version)
	version.Version = "v1.2.3-4-gabcdef0"
	// the containerd module go.mod requires is the one linked
	mod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/containerd/containerd/v2 (v\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod requires no github.com/containerd/containerd/v2")
	}
	var got map[string]string
	jsonOf(t, 0, &got, "version", "-o", "json")
	if got["program"] != "swiftctl" || got["version"] != "v1.2.3-4-gabcdef0" || got["containerd"] != string(m[1]) ||
		!strings.HasPrefix(got["go"], "go1.") {
		t.Errorf("version -o json = %v (containerd in go.mod: %s)", got, m[1])
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		so, _, code := swiftctlExit(t, args...)
		if code != 0 || !strings.HasPrefix(so, "swiftctl:\n  Version:    v1.2.3-4-gabcdef0\n  containerd: "+string(m[1])+"\n  Go version: go1.") {
			t.Errorf("%q: exit %d\n%s", args, code, so)
		}
	}
}

func TestConfigCheckJSON(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SWIFT_POLICY", "")
	cfg := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfg, []byte("policy_path = \"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	jsonOf(t, 0, &got, "config", "check", cfg, "-o", "json")
	rdmaTable, _ := got["rdma"].(map[string]any)
	if got["path"] != cfg || got["policy_path"] != nil || rdmaTable == nil || rdmaTable["memlock"] != nil ||
		rdmaTable["hca_handle"] != nil || rdmaTable["hca_object"] != nil || rdmaTable["default"] != false {
		t.Errorf("defaults: %v", got)
	}
	for _, k := range []string{"memlock", "hca_handle", "hca_object"} {
		if _, ok := rdmaTable[k]; !ok {
			t.Errorf("rdma.%s missing, want null: %v", k, got)
		}
	}
	pol := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(pol, []byte("[tenants.a]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "policy_path = %q\n[rdma]\ndefault = true\nmemlock = \"64Mi\"\nhca_handle = 8\n", pol), 0o644); err != nil {
		t.Fatal(err)
	}
	jsonOf(t, 0, &got, "config", "check", cfg, "-o", "json")
	rdmaTable, _ = got["rdma"].(map[string]any)
	if got["path"] != cfg || got["policy_path"] != pol || rdmaTable["default"] != true || rdmaTable["memlock"] != 67108864.0 ||
		rdmaTable["hca_handle"] != 8.0 || rdmaTable["hca_object"] != nil {
		t.Errorf("config: %v", got)
	}
	// a policy_path naming a missing file: a failed precondition
	if err := os.Remove(pol); err != nil {
		t.Fatal(err)
	}
	var je map[string]any
	jsonOf(t, 4, &je, "config", "check", cfg, "-o", "json")
	if je["class"] != "failed precondition" || je["exit_code"] != 4.0 || !strings.Contains(je["error"].(string), pol) ||
		strings.Contains(je["error"].(string), "failed precondition") {
		t.Errorf("config check with a missing policy: %v", je)
	}
	// a missing config: not found
	jsonOf(t, 5, &je, "config", "check", filepath.Join(dir, "absent.toml"), "-o", "json")
	if je["class"] != "not found" || !strings.Contains(je["error"].(string), filepath.Join(dir, "absent.toml")) {
		t.Errorf("config check of a missing file: %v", je)
	}
}

func TestDevicesJSON(t *testing.T) {
	dir := t.TempDir()
	tree, cfg := rxe0Node(t, dir)
	var got struct {
		Devices []struct {
			Name   string
			Uverbs struct {
				Path     string
				HostPath string `json:"host_path"`
				Major    int
				Minor    int
			}
		}
		RDMACM *struct {
			HostPath string `json:"host_path"`
			Major    int
			Minor    int
		} `json:"rdma_cm"`
		RDMACgroup *bool `json:"rdma_cgroup"`
	}
	jsonOf(t, 0, &got, "devices", "--config", cfg, "-o", "json")
	if len(got.Devices) != 1 || got.Devices[0].Name != "rxe0" || got.Devices[0].Uverbs.Path != "/dev/infiniband/uverbs0" ||
		got.Devices[0].Uverbs.HostPath != tree.DevRoot+"/infiniband/uverbs0" || got.Devices[0].Uverbs.Major != 231 ||
		got.Devices[0].Uverbs.Minor != 192 || got.RDMACM == nil || got.RDMACM.Major != 10 || got.RDMACM.Minor != 58 || got.RDMACgroup == nil {
		t.Errorf("devices -o json = %+v", got)
	}
	// a node without devices: an empty list, rdma_cm null
	empty := filepath.Join(dir, "empty.toml")
	if err := os.WriteFile(empty, fmt.Appendf(nil, "[rdma]\nsys_root = %q\n", filepath.Join(dir, "nothing")), 0o644); err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	jsonOf(t, 0, &raw, "devices", "--config", empty, "-o", "json")
	if devs, ok := raw["devices"].([]any); !ok || len(devs) != 0 || raw["rdma_cm"] != nil {
		t.Errorf("devices -o json on an empty node = %v", raw)
	}
}

func TestCDIGenerateJSON(t *testing.T) {
	dir := t.TempDir()
	_, cfg := rxe0Node(t, dir)
	type spec struct {
		CDIVersion string `json:"cdiVersion"`
		Kind       string
		Devices    []struct {
			Name           string
			ContainerEdits struct {
				DeviceNodes []struct {
					Path, HostPath string
					Major, Minor   int
				}
			} `json:"containerEdits"`
		}
		ContainerEdits struct {
			DeviceNodes []struct{ Path string }
		} `json:"containerEdits"`
	}
	var s spec
	jsonOf(t, 0, &s, "cdi", "generate", "--config", cfg, "--stdout", "-o", "json")
	if s.CDIVersion != "0.5.0" || s.Kind != "swift.io/rdma" || len(s.Devices) != 1 || s.Devices[0].Name != "rxe0" ||
		len(s.Devices[0].ContainerEdits.DeviceNodes) != 1 || s.Devices[0].ContainerEdits.DeviceNodes[0].Path != "/dev/infiniband/uverbs0" ||
		s.Devices[0].ContainerEdits.DeviceNodes[0].Minor != 192 || len(s.ContainerEdits.DeviceNodes) != 1 ||
		s.ContainerEdits.DeviceNodes[0].Path != "/dev/infiniband/rdma_cm" {
		t.Errorf("cdi generate --stdout -o json = %+v", s)
	}
	cdiDir := filepath.Join(dir, "cdi")
	var w struct {
		Path    string
		Devices []string
		Spec    spec
	}
	jsonOf(t, 0, &w, "cdi", "generate", "--config", cfg, "--dir", cdiDir, "-o", "json")
	if w.Path != cdiDir+"/swift.io-rdma.yaml" || len(w.Devices) != 1 || w.Devices[0] != "swift.io/rdma=rxe0" || w.Spec.Kind != "swift.io/rdma" {
		t.Errorf("cdi generate -o json = %+v", w)
	}
	if _, err := os.Stat(w.Path); err != nil {
		t.Error(err)
	}
}

func TestKeysShowJSON(t *testing.T) {
	ring := filepath.Join(t.TempDir(), "t.keys")
	for _, args := range [][]string{{"gen", "--id", "k1", ring}, {"rotate", "--id", "k2", ring}} {
		if _, se, code := swiftctlExit(t, append([]string{"keys"}, args...)...); code != 0 {
			t.Fatalf("keys %q: exit %d: %s", args, code, se)
		}
	}
	var got struct {
		File string
		Keys []struct {
			ID          string
			Fingerprint string
			Dial        *bool
			Key         any
		}
	}
	jsonOf(t, 0, &got, "keys", "show", ring, "-o", "json")
	fp := regexp.MustCompile(`^[0-9a-f]{16}$`)
	if got.File != ring || len(got.Keys) != 2 || got.Keys[0].ID != "k2" || got.Keys[1].ID != "k1" ||
		!fp.MatchString(got.Keys[0].Fingerprint) || !fp.MatchString(got.Keys[1].Fingerprint) ||
		got.Keys[0].Dial == nil || !*got.Keys[0].Dial || got.Keys[1].Dial == nil || *got.Keys[1].Dial || got.Keys[0].Key != nil {
		t.Errorf("keys show -o json = %+v", got)
	}
}

func TestPolicyCheckJSON(t *testing.T) {
	example := filepath.Join("..", "..", "examples", "policy.toml")
	var got struct {
		Path        *string
		Enforced    bool
		LocalTenant *string `json:"local_tenant"`
		Tenants     []struct {
			Name          string
			Namespaces    []string
			ClaimableFrom []string `json:"claimable_from"`
			Devices       []string
			Peers         []string
			ForkSharing   bool `json:"fork_sharing"`
			Seccomp       string
			KeyFile       *string `json:"key_file"`
			Container     map[string]*uint64
			Node          map[string]*uint64
		}
		Namespaces []struct {
			Namespace string
			Pattern   *string
			Tenant    *string
			MayClaim  []string `json:"may_claim"`
		}
	}
	jsonOf(t, 0, &got, "policy", "check", example, "-o", "json")
	if got.Path == nil || *got.Path != example || !got.Enforced || got.LocalTenant == nil || *got.LocalTenant != "ops" || len(got.Tenants) != 2 {
		t.Fatalf("policy check -o json = %+v", got)
	}
	ops, a := got.Tenants[0], got.Tenants[1]
	if ops.Name != "ops" || a.Name != "team-a" {
		t.Fatalf("tenants %q, %q; want ops, team-a", ops.Name, a.Name)
	}
	want := map[string]uint64{"containers": 32, "qps": 1024, "hca_handle": 64, "hca_object": 8192, "memlock": 16 << 30}
	for k, v := range want {
		if a.Node[k] == nil || *a.Node[k] != v {
			t.Errorf("team-a node %s = %v, want %d", k, a.Node[k], v)
		}
	}
	wantC := map[string]uint64{"qps": 64, "hca_handle": 4, "hca_object": 512, "memlock": 1 << 30}
	for k, v := range wantC {
		if a.Container[k] == nil || *a.Container[k] != v {
			t.Errorf("team-a container %s = %v, want %d", k, a.Container[k], v)
		}
	}
	if strings.Join(a.Devices, ",") != "mlx5_0,rxe0" || strings.Join(a.Peers, ",") != "10.0.0.0/8:18515-18600" ||
		!a.ForkSharing || a.Seccomp != "baseline" || a.KeyFile != nil || strings.Join(a.ClaimableFrom, ",") != "ci" {
		t.Errorf("team-a = %+v", a)
	}
	// ops sets no limits: every one null, and any device and peer (null)
	for _, k := range []string{"containers", "qps", "hca_handle", "hca_object", "memlock"} {
		if v, ok := ops.Node[k]; !ok || v != nil {
			t.Errorf("ops node %s = %v, want null", k, v)
		}
	}
	for _, k := range []string{"qps", "hca_handle", "hca_object", "memlock"} {
		if v, ok := ops.Container[k]; !ok || v != nil {
			t.Errorf("ops container %s = %v, want null", k, v)
		}
	}
	if ops.Devices != nil || ops.Peers != nil || ops.Seccomp != "none" || ops.ForkSharing {
		t.Errorf("ops = %+v", ops)
	}
	ns := map[string]string{}
	for _, n := range got.Namespaces {
		tenant := "(refused)"
		if n.Tenant != nil {
			tenant = *n.Tenant
		}
		ns[n.Namespace] = tenant + " " + strings.Join(n.MayClaim, ",")
	}
	for k, v := range map[string]string{"team-a": "team-a ", "team-a-example": "team-a ", "ci": "(refused) team-a",
		"kube-system": "ops ", "other-example": "(refused) "} {
		if ns[k] != v {
			t.Errorf("namespace %s: %q, want %q (%v)", k, ns[k], v, ns)
		}
	}

	// policy_path = "": no policy, null path
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("policy_path = \"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SWIFT_POLICY", "")
	var open map[string]any
	jsonOf(t, 0, &open, "policy", "check", "--config", cfg, "-o", "json")
	if v, ok := open["path"]; !ok || v != nil || open["enforced"] != false || open["local_tenant"] != "default" {
		t.Errorf("policy check -o json without a policy = %v", open)
	}
}

func TestPoolsJSON(t *testing.T) {
	_, state, cfg := poolsNode(t)
	acquireLease(t, state, "c0", t.TempDir())
	var got struct {
		Ledger  string
		Tenants []struct {
			Tenant string
			Usage  map[string]uint64
			Quota  map[string]*uint64
		}
		Leases []struct {
			Namespace, ID, Tenant string
			Alive                 bool
		}
	}
	jsonOf(t, 0, &got, "pools", "ls", "--config", cfg, "-o", "json")
	if got.Ledger != filepath.Join(state, ledger.FileName) || len(got.Tenants) != 2 || len(got.Leases) != 1 ||
		got.Leases[0].ID != "c0" || !got.Leases[0].Alive {
		t.Fatalf("pools ls -o json = %+v", got)
	}
	a, b := got.Tenants[0], got.Tenants[1]
	if a.Tenant != "a" || a.Usage["qps"] != 2 || a.Usage["containers"] != 1 || a.Usage["memlock"] != 4<<20 ||
		a.Quota["qps"] == nil || *a.Quota["qps"] != 10 {
		t.Errorf("tenant a = %+v", a)
	}
	// no quota: null, not 0
	for _, k := range []string{"containers", "hca_handle", "hca_object", "memlock"} {
		if v, ok := a.Quota[k]; !ok || v != nil {
			t.Errorf("tenant a quota %s = %v, want null", k, v)
		}
	}
	for _, k := range []string{"containers", "qps", "hca_handle", "hca_object", "memlock"} {
		if v, ok := b.Quota[k]; !ok || v != nil {
			t.Errorf("tenant b quota %s = %v, want null", k, v)
		}
	}
	var gc struct {
		Ledger    string
		DryRun    bool `json:"dry_run"`
		Reclaimed []map[string]any
	}
	jsonOf(t, 0, &gc, "pools", "gc", "--config", cfg, "--dry-run", "-o", "json")
	if !gc.DryRun || gc.Reclaimed == nil || len(gc.Reclaimed) != 0 || gc.Ledger != got.Ledger {
		t.Errorf("pools gc --dry-run -o json = %+v", gc)
	}
}

func TestCacheJSON(t *testing.T) {
	cfg, sysRoot, stateDir := cacheNodeFixture(t)
	var st map[string]any
	// not valid: the verdict alone on stdout, exit 1
	jsonOf(t, 1, &st, "cache", "check", "--config", cfg, "-o", "json")
	if st["state"] != "missing" || st["dir"] != nil || len(st["reasons"].([]any)) != 1 {
		t.Errorf("cache check -o json without a cache = %v", st)
	}
	var je map[string]any
	jsonOf(t, 5, &je, "cache", "show", "--config", cfg, "-o", "json")
	if je["class"] != "not found" || je["exit_code"] != 5.0 || !strings.HasPrefix(je["error"].(string), "no verbs cache to show: ") ||
		strings.HasSuffix(je["error"].(string), "not found") {
		t.Errorf("cache show -o json without a cache = %v", je)
	}
	dir := writeTestCache(t, sysRoot, stateDir)
	jsonOf(t, 0, &st, "cache", "check", "--config", cfg, "-o", "json")
	if st["state"] != "valid" || st["dir"] != dir || len(st["reasons"].([]any)) != 0 {
		t.Errorf("cache check -o json = %v", st)
	}
	var m struct {
		Fingerprint struct{ Devices []struct{ Name string } }
		Profile     struct {
			Runs    int
			Device  string
			Speedup float64
		}
		DriverFiles []string `json:"driver_files"`
	}
	jsonOf(t, 0, &m, "cache", "show", "--config", cfg, "-o", "json")
	if len(m.Fingerprint.Devices) != 1 || m.Fingerprint.Devices[0].Name != "rxe0" || m.Profile.Runs != 3 || m.Profile.Device != "rxe0" ||
		m.Profile.Speedup != 4 || strings.Join(m.DriverFiles, ",") != "rxe.driver" {
		t.Errorf("cache show -o json = %+v", m)
	}
}

func TestDoctorJSON(t *testing.T) {
	dir := t.TempDir()
	tree := rxe0Tree(t, dir)
	var rs []struct{ Check, Status, Detail, Fix string }
	// containerd is missing: a FAIL, so exit 1 with the report alone on stdout
	jsonOf(t, 1, &rs, "doctor", "-o", "json", "--config", filepath.Join(dir, "absent.toml"), "--sys-root", tree.SysRoot,
		"--dev-root", tree.DevRoot, "--containerd", filepath.Join(dir, "no-containerd"))
	st := map[string]string{}
	for _, r := range rs {
		st[r.Check] = r.Status
	}
	if st["containerd"] != "FAIL" || st["rdma.device/rxe0"] != "OK" || st["node.config"] != "OK" {
		t.Errorf("doctor -o json = %v", st)
	}
	// in text, the count of failures on stderr
	_, se, code := swiftctlExit(t, "doctor", "--config", filepath.Join(dir, "absent.toml"), "--sys-root", tree.SysRoot,
		"--dev-root", tree.DevRoot, "--containerd", filepath.Join(dir, "no-containerd"))
	if code != 1 || !regexp.MustCompile(`^swiftctl: [1-9][0-9]* check\(s\) failed\n$`).MatchString(se) {
		t.Errorf("doctor: exit %d, stderr %q", code, se)
	}
}
