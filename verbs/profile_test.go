package verbs

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func readProfile(t *testing.T) Profile {
	t.Helper()
	f, err := os.Open("testdata/profile-stock.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := ParseProfile(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseProfile(t *testing.T) {
	p := readProfile(t)
	if len(p.Runs) != 3 || len(p.Devices) != 2 || p.Libibverbs != "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0" {
		t.Fatalf("profile: %d runs, %d devices, lib %q", len(p.Runs), len(p.Devices), p.Libibverbs)
	}
	r := p.Runs[1]
	if r.Index != 1 || r.Exit != 0 || r.ProcessUS != 300001 || r.Cache != "none" || r.Pingpong != "ok" ||
		r.Device != "rxe0" || r.NDev != 2 || len(r.Calls) != len(Calls) || r.Calls["ibv_get_device_list"] != 210000 {
		t.Fatalf("run 1: %+v", r)
	}
	if len(p.Failed()) != 0 {
		t.Fatalf("failed runs: %+v", p.Failed())
	}
	d0, d1 := p.Device("rxe0"), p.Device("rxe1")
	if d0.Provider != "rxe" || d0.Uverbs != "uverbs0" || !strings.HasSuffix(d0.Library, "librxe-rdmav34.so") || len(d0.Attrs) != 3 {
		t.Fatalf("rxe0: %+v", d0)
	}
	if !d0.AttrStable() || d1.AttrStable() {
		t.Fatalf("attr stability: rxe0 %v rxe1 %v, want true false", d0.AttrStable(), d1.AttrStable())
	}
	ps0, ps1 := d0.PortsStatic(), d1.PortsStatic()
	want := PortStatic{Stable: true, MaxMTU: 5, GIDTblLen: 1024, PortCapFlags: 65536, MaxMsgSz: 1 << 31, PkeyTblLen: 1, MaxVLNum: 1, LinkLayer: 2}
	if len(ps0) != 1 || ps0[0] != want {
		t.Fatalf("rxe0 ports %+v, want %+v", ps0, want)
	}
	if len(ps1) != 1 || ps1[0].Stable {
		t.Fatalf("rxe1 ports %+v, want one unstable port", ps1)
	}
	m := p.Medians()
	if m["ibv_get_device_list"] != 210000 || m["process"] != 300001 || m["init"] != 0 || m["critical"] <= m["ibv_get_device_list"] {
		t.Fatalf("medians %v", m)
	}
}

func TestParseProfileErrors(t *testing.T) {
	p, err := ParseProfile(strings.NewReader("run=0 exit=1 process_us=5.0 cache=stale served=1 revalidations=1 retries=2 error=ibv_open_device errno=19 msg=\"No such device\"\nnoise line\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f := p.Failed(); len(f) != 1 || f[0].Error != "ibv_open_device" || f[0].Errno != 19 || f[0].Revalidations != 1 || f[0].Retries != 2 || f[0].Cache != "stale" {
		t.Fatalf("failed runs %+v", f)
	}
	if m := p.Medians(); len(m) != 0 {
		t.Fatalf("medians of failed runs: %v", m)
	}
	for name, in := range map[string]string{
		"bad hex":          "device name=a uverbs=uverbs0\nattr name=a len=2 hex=zz\n",
		"short attr":       "device name=a uverbs=uverbs0\nattr name=a len=3 hex=0102\n",
		"attr no device":   "attr name=a len=1 hex=01\n",
		"port no device":   "port name=a port=1\n",
		"huge line of hex": "device name=a uverbs=uverbs0\nattr name=a len=1 hex=" + strings.Repeat("0", 2<<20) + "\n",
	} {
		if _, err := ParseProfile(strings.NewReader(in)); err == nil {
			t.Errorf("%s: want error", name)
		} else if name != "huge line of hex" && !errors.Is(err, errdefs.ErrDataLoss) {
			t.Errorf("%s: %v, want DataLoss", name, err)
		}
	}
}

func TestKV(t *testing.T) {
	got := kv(`a=1 b= c="x y" d=2 e="unterminated`)
	want := map[string]string{"a": "1", "b": "", "c": "x y", "d": "2", "e": "unterminated"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("kv = %q, want %q", got, want)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2}} {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestPortsStaticGap(t *testing.T) {
	d := &DeviceProfile{Ports: map[int][]PortStatic{1: {{MaxMTU: 5}}, 3: {{MaxMTU: 4}}}}
	if ps := d.PortsStatic(); len(ps) != 1 || !ps[0].Stable {
		t.Fatalf("ports with a gap: %+v", ps)
	}
}

func TestTuningEnv(t *testing.T) {
	sandy := []byte("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 45\nmodel name\t: Xeon E5-2670\n")
	icelake := []byte("processor\t: 0\ncpu family\t: 6\nmodel\t\t: 106\n\nprocessor\t: 1\ncpu family\t: 6\nmodel\t\t: 106\n")
	amd := []byte("processor\t: 0\ncpu family\t: 25\nmodel\t\t: 42\n")
	if !IsSandyBridge(sandy) || IsSandyBridge(icelake) || IsSandyBridge(amd) || IsSandyBridge(nil) {
		t.Fatal("IsSandyBridge")
	}
	env, why := TuningEnv([]string{"rxe"}, icelake)
	if len(env) != 0 || len(why) != 0 {
		t.Fatalf("rxe: %v %v", env, why)
	}
	env, why = TuningEnv([]string{"mlx5", "rxe"}, icelake)
	if !reflect.DeepEqual(env, map[string]string{"MLX5_STALL_CQ_POLL": "0"}) || len(why) != 1 {
		t.Fatalf("mlx5 off Sandy Bridge: %v %v", env, why)
	}
	env, why = TuningEnv([]string{"mlx5"}, sandy)
	if len(env) != 0 || len(why) != 1 || !strings.Contains(why[0], "Sandy Bridge") {
		t.Fatalf("mlx5 on Sandy Bridge: %v %v", env, why)
	}
}

func TestConfigDir(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"rxe.driver":  "driver rxe\n",
		"mlx5.driver": "# comment\ndriver mlx5\n",
		"two.driver":  "driver siw\n  driver\tefa\n",
		"junk":        "nothing here\n",
	} {
		if err := os.WriteFile(dir+"/"+name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(dir+"/subdir", 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := ReadConfigDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("files %+v", files)
	}
	if got := StockDrivers(files); !reflect.DeepEqual(got, []string{"efa", "mlx5", "rxe", "siw"}) {
		t.Fatalf("StockDrivers = %v", got)
	}
	sel, missing := SelectDrivers(files, []string{"rxe", "efa", "hns"})
	if len(sel) != 2 || sel[0].Name != "rxe.driver" || sel[1].Name != "two.driver" || !reflect.DeepEqual(missing, []string{"hns"}) {
		t.Fatalf("SelectDrivers = %+v, %v", sel, missing)
	}
	if _, err := ReadConfigDir(dir + "/absent"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("ReadConfigDir(absent) = %v", err)
	}
}
