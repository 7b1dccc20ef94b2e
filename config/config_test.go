package config

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/pelletier/go-toml/v2"

	"github.com/swift-rdma/swift-containerd/config/tomlfile"
)

func TestDefault(t *testing.T) {
	want := Config{
		LogLevel:     "info",
		StateDir:     "/var/lib/swift",
		PolicyPath:   "/etc/swift/policy.toml",
		CRINamespace: "k8s.io",
		KeysDir:      "/etc/swift/keys",
		RDMA:         RDMA{Memlock: "unlimited", SysRoot: "/", DevRoot: "/dev"},
		Zygote:       Zygote{BinDir: DefaultZygoteBinDir, FunctionUIDBase: 2000000000},
		Hooks:        Hooks{NetCheck: true},
	}
	if got := Default(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Default() = %+v, want %+v", got, want)
	}
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate(): %v", err)
	}
	if got := Default().MemlockBytes(); got != MemlockUnlimited {
		t.Fatalf("Default().MemlockBytes() = %d, want unlimited", got)
	}
}

func TestPathFromEnv(t *testing.T) {
	t.Setenv(EnvPath, "")
	if got := PathFromEnv(); got != DefaultPath {
		t.Errorf("PathFromEnv() with %s empty = %q, want %q", EnvPath, got, DefaultPath)
	}
	t.Setenv(EnvPath, "/run/swift/other.toml")
	if got := PathFromEnv(); got != "/run/swift/other.toml" {
		t.Errorf("PathFromEnv() = %q, want /run/swift/other.toml", got)
	}
}

func TestPolicyFile(t *testing.T) {
	c := Default()
	t.Setenv(EnvPolicy, "")
	if got := c.PolicyFile(); got != DefaultPolicyPath {
		t.Errorf("PolicyFile() = %q, want %q", got, DefaultPolicyPath)
	}
	c.PolicyPath = "/srv/p.toml"
	if got := c.PolicyFile(); got != "/srv/p.toml" {
		t.Errorf("PolicyFile() = %q, want policy_path", got)
	}
	t.Setenv(EnvPolicy, "/run/p.toml")
	if got := c.PolicyFile(); got != "/run/p.toml" {
		t.Errorf("PolicyFile() with $%s = %q", EnvPolicy, got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	c, err := Load(filepath.Join(t.TempDir(), "absent.toml"))
	if err != nil {
		t.Fatalf("Load(missing): %v", err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Fatalf("Load(missing) = %+v, want Default()", c)
	}
}

func TestLoadUnreadable(t *testing.T) {
	dir := t.TempDir() // a directory cannot be read as a file
	_, err := Load(dir)
	if err == nil {
		t.Fatal("Load(directory): want error")
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q does not name %s", err, dir)
	}
}

const fullConfig = `# node config
log_level = "debug"
state_dir = "/srv/swift"
policy_path = "/srv/swift/policy.toml"
cri_namespace = "cri"
keys_dir = "/srv/swift/keys"

[rdma]
default = true
memlock = "1GiB"
hca_handle = 16
hca_object = 4096
sys_root = "/host"
dev_root = "/host/dev"

[rdma.env]
UCX_NET_DEVICES = "mlx5_0:1"
NCCL_IB_HCA = "mlx5"

[zygote]
bin_dir = "/opt/swift/bin"
function_uid_base = 3000000

[hooks]
path = "/opt/swift/bin/swift-hook"
netcheck = false
exclusive_move = true
`

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte(fullConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Config{
		LogLevel:      "debug",
		StateDir:      "/srv/swift",
		PolicyPath:    "/srv/swift/policy.toml",
		PolicyPathSet: true,
		CRINamespace:  "cri",
		KeysDir:       "/srv/swift/keys",
		RDMA: RDMA{
			Default: true, Memlock: "1GiB", HCAHandle: 16, HCAObject: 4096,
			SysRoot: "/host", DevRoot: "/host/dev",
			Env: map[string]string{"UCX_NET_DEVICES": "mlx5_0:1", "NCCL_IB_HCA": "mlx5"},
		},
		Zygote: Zygote{BinDir: "/opt/swift/bin", FunctionUIDBase: 3000000},
		Hooks:  Hooks{Path: "/opt/swift/bin/swift-hook", ExclusiveMove: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Load = %+v\nwant %+v", got, want)
	}
	if got.MemlockBytes() != 1<<30 {
		t.Errorf("MemlockBytes() = %d, want %d", got.MemlockBytes(), 1<<30)
	}
}

func TestParseFields(t *testing.T) {
	with := func(f func(*Config)) Config {
		c := Default()
		f(&c)
		return c
	}
	tests := []struct {
		name string
		toml string
		want Config
	}{
		{"empty", "", Default()},
		{"comments only", "# nothing\n\n", Default()},
		{"log_level", `log_level = "trace"`, with(func(c *Config) { c.LogLevel = "trace" })},
		{"state_dir", `state_dir = "/tmp/s"`, with(func(c *Config) { c.StateDir = "/tmp/s" })},
		{"policy_path", `policy_path = "/tmp/p.toml"`, with(func(c *Config) { c.PolicyPath, c.PolicyPathSet = "/tmp/p.toml", true })},
		{"rdma.default", "[rdma]\ndefault = true", with(func(c *Config) { c.RDMA.Default = true })},
		{"rdma.memlock", "[rdma]\nmemlock = \"64KiB\"", with(func(c *Config) { c.RDMA.Memlock = "64KiB" })},
		{"rdma.hca_handle", "[rdma]\nhca_handle = 4294967295", with(func(c *Config) { c.RDMA.HCAHandle = math.MaxUint32 })},
		{"rdma.hca_object", "[rdma]\nhca_object = 7", with(func(c *Config) { c.RDMA.HCAObject = 7 })},
		{"rdma.sys_root", "[rdma]\nsys_root = \"/host\"", with(func(c *Config) { c.RDMA.SysRoot = "/host" })},
		{"rdma.dev_root", "[rdma]\ndev_root = \"/host/dev\"", with(func(c *Config) { c.RDMA.DevRoot = "/host/dev" })},
		{"rdma.env", "[rdma.env]\nA = \"1\"\n\"B.C\" = \"x=y\"", with(func(c *Config) { c.RDMA.Env = map[string]string{"A": "1", "B.C": "x=y"} })},
		{"dotted keys", "rdma.default = true\nrdma.env.X = \"\"", with(func(c *Config) {
			c.RDMA.Default = true
			c.RDMA.Env = map[string]string{"X": ""}
		})},
		{"zygote.bin_dir", "[zygote]\nbin_dir = \"/opt/swift\"", with(func(c *Config) { c.Zygote.BinDir = "/opt/swift" })},
		{"hooks off", "[hooks]\nnetcheck = false", with(func(c *Config) { c.Hooks.NetCheck = false })},
		{"zygote.function_uid_base off", "[zygote]\nfunction_uid_base = 0", with(func(c *Config) { c.Zygote.FunctionUIDBase = 0 })},
		{"inline table", "rdma = { memlock = \"-1\", default = false }", with(func(c *Config) { c.RDMA.Memlock = "-1" })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("node.toml", []byte(tc.toml))
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.toml, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse(%q)\n got %+v\nwant %+v", tc.toml, got, tc.want)
			}
		})
	}
}

func TestParseLogLevels(t *testing.T) {
	for _, l := range []string{"trace", "debug", "info", "warn", "warning", "error", "fatal", "panic"} {
		c, err := Parse("n.toml", []byte(`log_level = "`+l+`"`))
		if err != nil || c.LogLevel != l {
			t.Errorf("log_level %q: got %q, %v", l, c.LogLevel, err)
		}
	}
}

// A malformed file is an InvalidArgument error naming the file and the line.
func TestParseMalformed(t *testing.T) {
	tests := []struct {
		name, toml, line string
	}{
		{"missing value", "log_level = ", "line 1"},
		{"unterminated string", "\n\nlog_level = 'info", "line 3"},
		{"unclosed table header", "log_level = \"info\"\n[rdma\nmemlock = \"1G\"", "line 2"},
		{"bare word value", "[rdma]\n\ndefault = yes", "line 3"},
		{"wrong type string", "log_level = 5", "line 1"},
		{"wrong type table", "rdma = 3", "line 1"},
		{"wrong type env", "[rdma]\nenv = [\"A=1\"]", "line 2"},
		{"wrong type uint", "[rdma]\nhca_handle = \"16\"", "line 2"},
		{"duplicate key", "log_level = \"info\"\nlog_level = \"debug\"", "line 2"},
		{"duplicate table", "[rdma]\ndefault = true\n[rdma]\ndefault = false", "line 3"},
		{"uint32 overflow", "[rdma]\nhca_handle = 4294967296", "line 2"},
		{"negative uint", "[rdma]\n\nhca_object = -1", "line 3"},
		// go-toml before v2.4 panicked on a table header through a scalar.
		{"table through env value", "\n[rdma.env.A.B]", "line 2"},
		{"table through bool", "[rdma.default.x]", "line 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const name = "/etc/swift/bad.toml"
			_, err := Parse(name, []byte(tc.toml))
			if err == nil {
				t.Fatalf("Parse(%q): want error", tc.toml)
			}
			if !errdefs.IsInvalidArgument(err) {
				t.Errorf("error %q is not InvalidArgument", err)
			}
			if !strings.Contains(err.Error(), name) {
				t.Errorf("error %q does not name the file %s", err, name)
			}
			if !strings.Contains(err.Error(), tc.line+":") && !strings.Contains(err.Error(), tc.line+",") {
				t.Errorf("error %q does not say %q", err, tc.line)
			}
		})
	}
}

func TestLoadMalformedNamesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(path, []byte("[rdma]\nmemlock = \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("Load(malformed) error = %v; want InvalidArgument naming %s and line 2", err, path)
	}
}

func TestParseUnknownKeys(t *testing.T) {
	in := "log_level = \"info\"\nloglevel = \"debug\"\n[rdma]\nmemlock = \"1Gi\"\nhca_handles = 3\n[metrics]\nport = 1\n"
	_, err := Parse("n.toml", []byte(in))
	if !errdefs.IsInvalidArgument(err) {
		t.Fatalf("error %v is not InvalidArgument", err)
	}
	want := "node config n.toml: " +
		"line 2: loglevel: unknown key (known here: log_level, state_dir, policy_path, cri_namespace, keys_dir, [rdma], [zygote], [hooks]); " +
		"line 5: rdma.hca_handles: unknown key (known here: default, memlock, hca_handle, hca_object, sys_root, dev_root, pod_softroce, [rdma.env]); " +
		"line 6: metrics: unknown key (known here: log_level, state_dir, policy_path, cri_namespace, keys_dir, [rdma], [zygote], [hooks])"
	if err.Error() != want {
		t.Errorf("error\n %q\nwant\n %q", err, want)
	}
}

// A value of the wrong type is named by its key as the file spells it,
// never by a Go type or struct field.
func TestParseTypeErrors(t *testing.T) {
	tests := []struct {
		name, toml, want string
	}{
		{"string for an integer", "[rdma]\nhca_handle = \"16\"", "line 2: rdma.hca_handle: want an integer, got a TOML string"},
		{"float for an integer", "[rdma]\nhca_object = 1.5", "line 2: rdma.hca_object: want an integer, got a TOML float"},
		{"integer for a string", "log_level = 5", "line 1: log_level: want a string, got a TOML integer"},
		{"integer for a table", "rdma = 3", "line 1: rdma: want a table, got a TOML integer"},
		{"array for env", "[rdma]\nenv = [\"A=1\"]", "line 2: rdma.env: want a table of strings, got a TOML array"},
		{"integer env value", "[rdma.env]\nA = 1", "line 2: rdma.env.A: want a string, got a TOML integer"},
		{"string for a bool", "[hooks]\nnetcheck = \"yes\"", "line 2: hooks.netcheck: want true or false, got a TOML string"},
		{"negative uid base", "[zygote]\nfunction_uid_base = -1", "line 2: zygote.function_uid_base: -1: want an integer from 0 to 4294967295"},
		{"uid base past uint32", "[zygote]\nfunction_uid_base = 4294967296", "line 2: zygote.function_uid_base: 4294967296: want an integer from 0 to 4294967295"},
		{"inline table", "rdma = { hca_handle = \"x\" }", "line 1: rdma.hca_handle: want an integer, got a TOML string"},
		{"dotted key", "\nrdma.memlock = 1024", "line 2: rdma.memlock: want a string, got a TOML integer"},
		{"table through a bool", "[rdma.default.x]", "line 1: rdma.default: want true or false, got a TOML table"},
		{"array of tables", "[[hooks]]\npath = \"/x\"", "line 1: hooks: want a table, got a TOML array of tables"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("/etc/swift/config.toml", []byte(tc.toml))
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("Parse(%q) = %v, want InvalidArgument", tc.toml, err)
			}
			if want := "node config /etc/swift/config.toml: " + tc.want; err.Error() != want {
				t.Errorf("Parse(%q)\n got %q\nwant %q", tc.toml, err, want)
			}
		})
	}
}

// Unknown keys, values of the wrong type and invalid values of one file
// are reported together, in line order.
func TestParseReportsEveryProblem(t *testing.T) {
	in := "log_level = \"loud\"\nstate_dir = 7\n[rdma]\nmemlock = \"1g\"\nhca_handle = \"16\"\nextra = true\n[zygote]\nbin_dir = \"lib\"\n"
	_, err := Parse("n.toml", []byte(in))
	var fe *tomlfile.Error
	if !errors.As(err, &fe) || !errdefs.IsInvalidArgument(err) {
		t.Fatalf("error %v (%T) is not an InvalidArgument *tomlfile.Error", err, err)
	}
	want := []string{
		`line 1: log_level: "loud": want trace, debug, info, warn or error`,
		`line 2: state_dir: want a string, got a TOML integer`,
		`line 4: rdma.memlock: "1g": ambiguous size; write 1Gi (1073741824 bytes) or 1G (1000000000 bytes)`,
		`line 5: rdma.hca_handle: want an integer, got a TOML string`,
		`line 6: rdma.extra: unknown key (known here: default, memlock, hca_handle, hca_object, sys_root, dev_root, pod_softroce, [rdma.env])`,
		`line 8: zygote.bin_dir: "lib": must be an absolute path`,
	}
	var got []string
	for _, p := range fe.Problems {
		got = append(got, p.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems\n got %q\nwant %q", got, want)
	}
}

func TestParseInvalidValues(t *testing.T) {
	tests := []struct {
		name, toml string
		want       []string // substrings of the error
	}{
		{"log_level unknown", `log_level = "verbose"`, []string{"log_level", `"verbose"`}},
		{"log_level empty", `log_level = ""`, []string{"log_level"}},
		{"log_level case", `log_level = "INFO"`, []string{"log_level", `"INFO"`}},
		{"state_dir relative", `state_dir = "var/lib/swift"`, []string{"state_dir", "var/lib/swift", "absolute"}},
		{"state_dir empty", `state_dir = ""`, []string{"state_dir", "absolute"}},
		{"policy_path relative", `policy_path = "policy.toml"`, []string{"policy_path", "policy.toml", "absolute"}},
		{"memlock garbage", "[rdma]\nmemlock = \"lots\"", []string{"rdma.memlock", `"lots"`}},
		{"memlock too small", "[rdma]\nmemlock = \"4Ki\"", []string{`rdma.memlock: "4Ki" is below 64KiB`}},
		{"memlock ambiguous", "[rdma]\nmemlock = \"4K\"", []string{`line 2: rdma.memlock: "4K": ambiguous size; write 4Ki (4096 bytes) or 4k (4000 bytes)`}},
		{"memlock empty", "[rdma]\nmemlock = \"\"", []string{"rdma.memlock"}},
		{"sys_root relative", "[rdma]\nsys_root = \"host\"", []string{"rdma.sys_root", `"host"`, "absolute"}},
		{"sys_root empty", "[rdma]\nsys_root = \"\"", []string{"rdma.sys_root"}},
		{"dev_root relative", "[rdma]\ndev_root = \"./dev\"", []string{"rdma.dev_root", `"./dev"`}},
		{"keys_dir relative", "keys_dir = \"keys\"", []string{"keys_dir", `"keys"`, "absolute"}},
		{"zygote.bin_dir relative", "[zygote]\nbin_dir = \"lib/swift\"", []string{"zygote.bin_dir", `"lib/swift"`, "absolute"}},
		{"hooks.path relative", "[hooks]\npath = \"bin/swift-hook\"", []string{"hooks.path", `"bin/swift-hook"`, "absolute", "line 2"}},
		{"hooks.netcheck not a bool", "[hooks]\nnetcheck = \"yes\"", []string{"line 2: hooks.netcheck: want true or false, got a TOML string"}},
		{"zygote.function_uid_base root's range", "[zygote]\nfunction_uid_base = 5", []string{"line 2: zygote.function_uid_base: 5: want 0 (functions run as the container's user) or a uid from 1000 to 4294836222 (the node's 1024 ranges of 128 uids follow it)"}},
		{"zygote.function_uid_base past uid_t", "[zygote]\nfunction_uid_base = 4294967200", []string{"zygote.function_uid_base: 4294967200: want 0"}},
		{"zygote.function_uid_base without room for the ranges", "[zygote]\nfunction_uid_base = 4294836223", []string{"zygote.function_uid_base: 4294836223: want 0"}},
		{"zygote.function_uid_base negative", "[zygote]\nfunction_uid_base = -1", []string{"line 2: zygote.function_uid_base: -1: want an integer from 0 to 4294967295"}},
		{"env key with =", "[rdma.env]\n\"A=B\" = \"x\"", []string{`line 2: rdma.env."A=B": not a valid variable name`}},
		{"env key empty", "[rdma.env]\n\"\" = \"x\"", []string{`rdma.env."": not a valid variable name`}},
		{"env key with NUL", "[rdma.env]\n\"A\\u0000B\" = \"x\"", []string{`rdma.env."A\u0000B": not a valid variable name`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("node.toml", []byte(tc.toml))
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want error", tc.toml, c)
			}
			if !errdefs.IsInvalidArgument(err) {
				t.Errorf("error %q is not InvalidArgument", err)
			}
			for _, w := range append([]string{"node.toml"}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !reflect.DeepEqual(c, Config{}) {
				t.Errorf("Parse returned %+v with the error, want zero Config", c)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := Default()
	ok.RDMA.Env = map[string]string{"A": "1"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(valid): %v", err)
	}
	ok.PolicyPath = "" // no policy, explicitly
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(policy_path = \"\"): %v", err)
	}
	bad := []func(*Config){
		func(c *Config) { c.LogLevel = "loud" },
		func(c *Config) { c.StateDir = "rel" },
		func(c *Config) { c.PolicyPath = "policy.toml" },
		func(c *Config) { c.CRINamespace = "" },
		func(c *Config) { c.RDMA.Memlock = "1" },
		func(c *Config) { c.RDMA.SysRoot = "" },
		func(c *Config) { c.RDMA.DevRoot = "dev" },
		func(c *Config) { c.RDMA.Env = map[string]string{"A": "1", "B=": "2"} },
		func(c *Config) { c.Zygote.BinDir = "" },
	}
	for i, f := range bad {
		c := Default()
		f(&c)
		if err := c.Validate(); err == nil || !errdefs.IsInvalidArgument(err) {
			t.Errorf("case %d: Validate(%+v) = %v, want InvalidArgument", i, c, err)
		}
	}
}

// Sizes are Kubernetes quantities: Ki, Mi, Gi... are powers of 1024, k,
// M, G... powers of 1000, a plain integer is bytes; a spelling that could
// mean either is refused, naming both.
func TestParseMemlock(t *testing.T) {
	valid := []struct {
		in   string
		want uint64
	}{
		{"unlimited", MemlockUnlimited},
		{"-1", MemlockUnlimited},
		{"65536", 65536},
		{"65536B", 65536},
		{"64Ki", 64 << 10},
		{"64KiB", 64 << 10},
		{"64 KiB", 64 << 10},
		{"66k", 66000},
		{"4Mi", 4 << 20},
		{"4MiB", 4 << 20},
		{"4M", 4000000},
		{"1Gi", 1 << 30},
		{"1GiB", 1 << 30},
		{"1G", 1000000000},
		{"1.5Gi", 1610612736},
		{"0.5M", 500000},
		{"2Ti", 2 << 40},
		{"2T", 2000000000000},
		{"1Pi", 1 << 50},
		{"3P", 3000000000000000},
		{"15Ei", 15 << 60},
		{"18E", 18000000000000000000},
		{"17179869183GiB", (1<<34 - 1) << 30},
		{"18446744073709551615", math.MaxUint64},
	}
	for _, tc := range valid {
		got, err := ParseMemlock(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseMemlock(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	const notSize = "not a size: write bytes (65536) or a Kubernetes quantity such as 64Ki, 1Gi (powers of 1024) or 64M, 1G (powers of 1000)"
	invalid := []struct {
		in, want string
	}{
		{"1g", `"1g": ambiguous size; write 1Gi (1073741824 bytes) or 1G (1000000000 bytes)`},
		{"64m", `"64m": ambiguous size; write 64Mi (67108864 bytes) or 64M (64000000 bytes)`},
		{"64K", `"64K": ambiguous size; write 64Ki (65536 bytes) or 64k (64000 bytes)`},
		{"512MB", `"512MB": ambiguous size; write 512Mi (536870912 bytes) or 512M (512000000 bytes)`},
		{"1GB", `"1GB": ambiguous size; write 1Gi (1073741824 bytes) or 1G (1000000000 bytes)`},
		{"2kB", `"2kB": ambiguous size; write 2Ki (2048 bytes) or 2k (2000 bytes)`},
		{"1gi", `"1gi": ambiguous size; write 1Gi (1073741824 bytes) or 1G (1000000000 bytes)`},
		{"1kib", `"1kib": ambiguous size; write 1Ki (1024 bytes) or 1k (1000 bytes)`},
		{"1.5t", `"1.5t": ambiguous size; write 1.5Ti (1649267441664 bytes) or 1.5T (1500000000000 bytes)`},
		{"1 g", `"1 g": ambiguous size; write 1Gi (1073741824 bytes) or 1G (1000000000 bytes)`},
		{"", `"": ` + notSize},
		{"Unlimited", `"Unlimited": ` + notSize},
		{"infinity", `"infinity": ` + notSize},
		{"-2", `"-2": ` + notSize},
		{"abc", `"abc": ` + notSize},
		{"KiB", `"KiB": ` + notSize},
		{"1 K i B", `"1 K i B": ` + notSize},
		{"0x10000", `"0x10000": ` + notSize},
		{"1e9", `"1e9": ` + notSize},
		{" 65536", `" 65536": ` + notSize},
		{"65536 ", `"65536 ": ` + notSize},
		{"64  Ki", `"64  Ki": ` + notSize},
		{"1.Gi", `"1.Gi": ` + notSize},
		{".5Gi", `".5Gi": ` + notSize},
		{"1.2.3Gi", `"1.2.3Gi": ` + notSize},
		{"1.5", `"1.5": not a whole number of bytes`},
		{"1.0000001Ki", `"1.0000001Ki": not a whole number of bytes`},
		{"99999999999999999999", `"99999999999999999999": overflows 64 bits`},
		{"17179869184GiB", `"17179869184GiB": overflows 64 bits`},
		{"16777216Ti", `"16777216Ti": overflows 64 bits`},
		{"19E", `"19E": overflows 64 bits`},
		{"0", `"0" is below 64KiB, too small for any RDMA registration`},
		{"65535", `"65535" is below 64KiB, too small for any RDMA registration`},
		{"63Ki", `"63Ki" is below 64KiB, too small for any RDMA registration`},
		{"64k", `"64k" is below 64KiB, too small for any RDMA registration`},
	}
	for _, tc := range invalid {
		got, err := ParseMemlock(tc.in)
		if err == nil {
			t.Errorf("ParseMemlock(%q) = %d, want error", tc.in, got)
			continue
		}
		if !errdefs.IsInvalidArgument(err) {
			t.Errorf("ParseMemlock(%q): error %q is not InvalidArgument", tc.in, err)
		}
		if want := tc.want + ": invalid argument"; err.Error() != want {
			t.Errorf("ParseMemlock(%q)\n got %q\nwant %q", tc.in, err, want)
		}
		if got != 0 {
			t.Errorf("ParseMemlock(%q) = %d with error, want 0", tc.in, got)
		}
	}
}

func TestMemlockBytes(t *testing.T) {
	for in, want := range map[string]uint64{
		"unlimited": MemlockUnlimited, "-1": MemlockUnlimited, "4MiB": 4 << 20, "65536": 65536,
		"1": 0, "garbage": 0,
	} {
		c := Default()
		c.RDMA.Memlock = in
		if got := c.MemlockBytes(); got != want {
			t.Errorf("MemlockBytes with memlock %q = %d, want %d", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("config.toml", []byte(fullConfig))
	f.Add("c.toml", []byte(""))
	f.Add("/etc/swift/config.toml", []byte("log_level = \"warn\"\n[rdma]\nmemlock = \"4MiB\"\nhca_handle = 1\n"))
	f.Add("x", []byte("[rdma.env]\n\"A=B\" = \"x\"\n"))
	f.Add("y", []byte("rdma = { memlock = \"17179869184GiB\" }"))
	f.Add("z", []byte("log_level = \"info\"\nlog_level = \"debug\""))
	f.Add("w", []byte("[rdma]\nhca_object = -1\nsys_root = \"rel\"\nunknown = 1\n"))
	f.Add("v", []byte("state_dir = 'a\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		c, err := Parse(name, data)
		if err != nil {
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("Parse(%q): error %q is not InvalidArgument", data, err)
			}
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("Parse(%q): error %q does not contain the name %q", data, err, name)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse(%q) succeeded but Validate fails: %v", data, err)
		}
		if c.MemlockBytes() < 64<<10 {
			t.Fatalf("Parse(%q): MemlockBytes() = %d", data, c.MemlockBytes())
		}
		// What was accepted survives a round trip through TOML.
		out, err := toml.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", c, err)
		}
		c2, err := Parse(name, out)
		if err != nil {
			t.Fatalf("re-Parse(%q) of accepted config: %v", out, err)
		}
		c2.PolicyPathSet = c.PolicyPathSet // Marshal writes policy_path whether the input set it or not
		if len(c.RDMA.Env) == 0 && len(c2.RDMA.Env) == 0 {
			c.RDMA.Env, c2.RDMA.Env = nil, nil // an empty [rdma.env] may come back absent
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", c, c2)
		}
	})
}

// Check is what `swiftctl config check` reports: unlike Load, a missing
// file is an error, and so is a tenant policy the config names that the
// shim could not read.
func TestCheck(t *testing.T) {
	t.Setenv(EnvPolicy, "")
	dir := t.TempDir()
	policyFile := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(policyFile, []byte("[tenants.a]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "absent.toml")
	typo := filepath.Join(dir, "polcy.toml")
	tests := []struct {
		name  string
		path  string
		env   string
		class func(error) bool
		want  string // the whole error; "" for success
	}{
		{"missing config", missing, "", errdefs.IsNotFound,
			"node config " + missing + " does not exist (the shim would run with the built-in defaults; write it, for example from examples/config.toml, or name another file): not found"},
		{"policy present", write("ok.toml", "policy_path = \""+policyFile+"\"\n"), "", nil, ""},
		{"no policy by choice", write("none.toml", "policy_path = \"\"\n"), "", nil, ""},
		{"built-in policy path missing (a fresh node runs open)", write("default.toml", "log_level = \"info\"\n"), "", nil, ""},
		{"policy_path names the built-in path, missing", write("named.toml", "policy_path = \""+DefaultPolicyPath+"\"\n"), "",
			errdefs.IsFailedPrecondition,
			"node config " + filepath.Join(dir, "named.toml") + ": policy_path names " + DefaultPolicyPath + ", which does not exist: the shim refuses every opted-in container " +
				"until it does (write the tenant policy there, correct the path, or set policy_path = \"\" to run without a policy): failed precondition"},
		{"policy_path names a missing file", write("typo.toml", "policy_path = \""+typo+"\"\n"), "", errdefs.IsFailedPrecondition,
			"node config " + filepath.Join(dir, "typo.toml") + ": policy_path names " + typo + ", which does not exist: the shim refuses every opted-in container " +
				"until it does (write the tenant policy there, correct the path, or set policy_path = \"\" to run without a policy): failed precondition"},
		{"$SWIFT_POLICY names a missing file", filepath.Join(dir, "ok.toml"), typo, errdefs.IsFailedPrecondition,
			"node config " + filepath.Join(dir, "ok.toml") + ": $SWIFT_POLICY (which overrides policy_path) names " + typo + ", which does not exist: the shim refuses every opted-in container " +
				"until it does (write the tenant policy there, correct the path, or set policy_path = \"\" to run without a policy): failed precondition"},
		{"policy_path names a directory", write("dir.toml", "policy_path = \""+dir+"\"\n"), "", errdefs.IsFailedPrecondition,
			"node config " + filepath.Join(dir, "dir.toml") + ": policy_path names " + dir + ", which is not a file: the shim refuses every opted-in container: failed precondition"},
		{"malformed config", write("bad.toml", "[rdma]\nhca_handle = \"16\"\n"), "", errdefs.IsInvalidArgument,
			"node config " + filepath.Join(dir, "bad.toml") + ": line 2: rdma.hca_handle: want an integer, got a TOML string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvPolicy, tc.env)
			c, err := Check(tc.path)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check(%s): %v", tc.path, err)
				}
				if c.StateDir == "" {
					t.Fatalf("Check(%s) = %+v, want the parsed config", tc.path, c)
				}
				return
			}
			if err == nil || !tc.class(err) {
				t.Fatalf("Check(%s) = %v, want an error of the right class", tc.path, err)
			}
			if err.Error() != tc.want {
				t.Errorf("Check(%s)\n got %q\nwant %q", tc.path, err, tc.want)
			}
			if !reflect.DeepEqual(c, Config{}) {
				t.Errorf("Check returned %+v with its error, want zero Config", c)
			}
		})
	}
}
