package config

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/pelletier/go-toml/v2"
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
		LogLevel:     "debug",
		StateDir:     "/srv/swift",
		PolicyPath:   "/srv/swift/policy.toml",
		CRINamespace: "cri",
		KeysDir:      "/srv/swift/keys",
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
		{"policy_path", `policy_path = "/tmp/p.toml"`, with(func(c *Config) { c.PolicyPath = "/tmp/p.toml" })},
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
	in := "log_level = \"info\"\nloglevel = \"debug\"\n[rdma]\nmemlock = \"1G\"\nhca_handles = 3\n[metrics]\nport = 1\n"
	_, err := Parse("n.toml", []byte(in))
	if err == nil {
		t.Fatal("want error")
	}
	if !errdefs.IsInvalidArgument(err) {
		t.Errorf("error %q is not InvalidArgument", err)
	}
	for _, want := range []string{"n.toml", `line 2: unknown key "loglevel"`, `line 5: unknown key "rdma.hca_handles"`, `"metrics`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
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
		{"memlock too small", "[rdma]\nmemlock = \"4K\"", []string{"rdma.memlock", `"4K"`, "64KiB"}},
		{"memlock empty", "[rdma]\nmemlock = \"\"", []string{"rdma.memlock"}},
		{"sys_root relative", "[rdma]\nsys_root = \"host\"", []string{"rdma.sys_root", `"host"`, "absolute"}},
		{"sys_root empty", "[rdma]\nsys_root = \"\"", []string{"rdma.sys_root"}},
		{"dev_root relative", "[rdma]\ndev_root = \"./dev\"", []string{"rdma.dev_root", `"./dev"`}},
		{"keys_dir relative", "keys_dir = \"keys\"", []string{"keys_dir", `"keys"`, "absolute"}},
		{"zygote.bin_dir relative", "[zygote]\nbin_dir = \"lib/swift\"", []string{"zygote.bin_dir", `"lib/swift"`, "absolute"}},
		{"hooks.path relative", "[hooks]\npath = \"bin/swift-hook\"", []string{"hooks.path", `"bin/swift-hook"`, "absolute", "line 2"}},
		{"hooks.netcheck not a bool", "[hooks]\nnetcheck = \"yes\"", []string{"line 2", "bool"}},
		{"zygote.function_uid_base root's range", "[zygote]\nfunction_uid_base = 5", []string{"zygote.function_uid_base 5", "from 1000 to 4294967166"}},
		{"zygote.function_uid_base past uid_t", "[zygote]\nfunction_uid_base = 4294967200", []string{"zygote.function_uid_base 4294967200", "from 1000"}},
		{"zygote.function_uid_base negative", "[zygote]\nfunction_uid_base = -1", []string{"line 2, column 21", "cannot be stored in uint32"}},
		{"env key with =", "[rdma.env]\n\"A=B\" = \"x\"", []string{"rdma.env", `"A=B"`}},
		{"env key empty", "[rdma.env]\n\"\" = \"x\"", []string{"rdma.env", `""`}},
		{"env key with NUL", "[rdma.env]\n\"A\\u0000B\" = \"x\"", []string{"rdma.env", `"A\x00B"`}},
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

func TestParseMemlock(t *testing.T) {
	valid := []struct {
		in   string
		want uint64
	}{
		{"unlimited", MemlockUnlimited},
		{"-1", MemlockUnlimited},
		{"65536", 65536},
		{"65536B", 65536},
		{"64K", 64 << 10},
		{"64KiB", 64 << 10},
		{"64 KiB", 64 << 10},
		{"4M", 4 << 20},
		{"4MiB", 4 << 20},
		{"1G", 1 << 30},
		{"1GiB", 1 << 30},
		{"2T", 2 << 40},
		{"2TiB", 2 << 40},
		{"17179869183GiB", (1<<34 - 1) << 30},
		{"18446744073709551615", math.MaxUint64},
	}
	for _, tc := range valid {
		got, err := ParseMemlock(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseMemlock(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	invalid := []struct {
		in, why string
	}{
		{"", "not"},
		{"Unlimited", "not"},
		{"infinity", "not"},
		{"-2", "not"},
		{"abc", "not"},
		{"KiB", "not"},
		{"1.5GiB", "not"},
		{"1kib", "not"},
		{"1 K i B", "not"},
		{"0x10000", "not"},
		{" 65536", "not"},
		{"99999999999999999999", "not"},
		{"0", "below 64KiB"},
		{"65535", "below 64KiB"},
		{"63KiB", "below 64KiB"},
		{"1B", "below 64KiB"},
		{"0GiB", "below 64KiB"},
		{"17179869184GiB", "overflows"},
		{"16777216TiB", "overflows"},
		{"18446744073709551615K", "overflows"},
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
		if !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), `"`+tc.in+`"`) {
			t.Errorf("ParseMemlock(%q): error %q, want it to quote the input and say %q", tc.in, err, tc.why)
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
		if len(c.RDMA.Env) == 0 && len(c2.RDMA.Env) == 0 {
			c.RDMA.Env, c2.RDMA.Env = nil, nil // an empty [rdma.env] may come back absent
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", c, c2)
		}
	})
}
