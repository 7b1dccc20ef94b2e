package verbs

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
)

// Calls are the control-plane calls swift-profile times, in order. The
// critical path is their sum plus the preload's validation time.
var Calls = []string{
	"ibv_get_device_list", "ibv_open_device", "ibv_query_device", "ibv_query_port",
	"ibv_query_gid", "ibv_alloc_pd", "ibv_reg_mr", "ibv_create_cq", "ibv_create_qp",
	"ibv_modify_qp_init", "ibv_modify_qp_rtr", "ibv_modify_qp_rts",
}

// NeverCached are the calls of Calls no cache may answer: each creates or
// changes a kernel object (the device context, PD, MR, CQ, QP and its
// state), so their time is the floor of any cached critical path.
var NeverCached = []string{
	"ibv_open_device", "ibv_alloc_pd", "ibv_reg_mr", "ibv_create_cq", "ibv_create_qp",
	"ibv_modify_qp_init", "ibv_modify_qp_rtr", "ibv_modify_qp_rts",
}

// Run is one swift-profile run (one fresh process).
type Run struct {
	Index      int
	Exit       int
	ProcessUS  float64 // wall time of the process as its parent saw it
	Cache      string  // the preload's state: valid, stale, unusable, off, none
	Served     int     // device queries answered from the snapshot
	PortChecks int
	// Revalidations and Retries count the preload's error-triggered
	// revalidations (failed calls after cached data) and corrected retries.
	Revalidations int
	Retries       int
	InitUS        float64            // the library's validation (before main when preloaded)
	Entry         string             // how libswiftverbs.so came in: preload, provider or none
	Patched       int                // provider entry: the program's slots pointed at its wrappers
	Calls         map[string]float64 // call -> µs
	CriticalUS    float64            // InitUS + every call
	Pingpong      string             // ok, fail, skipped
	Device        string
	NDev          int
	Error         string // the failing call, when Exit != 0
	Errno         int
}

// DeviceProfile is what --info reported for one device, per run.
type DeviceProfile struct {
	Name     string
	Uverbs   string
	Provider string // provider name, e.g. rxe or mlx5
	Library  string // the provider's shared object
	Attrs    [][]byte
	Ports    map[int][]PortStatic // port number -> one entry per run
}

// Profile is a parsed swift-profile output.
type Profile struct {
	Runs       []Run
	Libibverbs string
	Devices    []*DeviceProfile
}

// Device returns the device called name.
func (p *Profile) Device(name string) *DeviceProfile {
	for _, d := range p.Devices {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// kv splits "a=1 b=2 msg="x y"" into a map (values may be double-quoted).
func kv(s string) map[string]string {
	m := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			break
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				v, rest = rest[1:], ""
			} else {
				v, rest = rest[1:1+end], rest[2+end:]
			}
		} else if i := strings.IndexByte(rest, ' '); i >= 0 {
			v, rest = rest[:i], rest[i:]
		} else {
			v, rest = rest, ""
		}
		m[k] = v
		s = rest
	}
	return m
}

func atoi(m map[string]string, k string) int {
	n, _ := strconv.Atoi(m[k])
	return n
}

func atof(m map[string]string, k string) float64 {
	f, _ := strconv.ParseFloat(m[k], 64)
	return f
}

func atou(m map[string]string, k string) uint64 {
	n, _ := strconv.ParseUint(m[k], 10, 64)
	return n
}

// ParseProfile reads swift-profile's output. Lines it does not know are
// ignored; a run line without timings is kept with its error.
func ParseProfile(r io.Reader) (Profile, error) {
	var p Profile
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		kind, rest, _ := strings.Cut(line, " ")
		switch {
		case strings.HasPrefix(line, "run="):
			m := kv(line)
			run := Run{
				Index: atoi(m, "run"), Exit: atoi(m, "exit"), ProcessUS: atof(m, "process_us"),
				Cache: m["cache"], Served: atoi(m, "served"), PortChecks: atoi(m, "port_checks"),
				Revalidations: atoi(m, "revalidations"), Retries: atoi(m, "retries"),
				InitUS: atof(m, "init_us"), CriticalUS: atof(m, "critical_us"), Pingpong: m["pingpong"],
				Device: m["device"], NDev: atoi(m, "ndev"), Error: m["error"], Errno: atoi(m, "errno"), Entry: m["entry"],
				Patched: atoi(m, "patched"),
				Calls:   map[string]float64{},
			}
			for _, c := range Calls {
				if v, ok := m[c+"_us"]; ok {
					run.Calls[c], _ = strconv.ParseFloat(v, 64)
				}
			}
			p.Runs = append(p.Runs, run)
		case kind == "libibverbs":
			p.Libibverbs = kv(rest)["path"]
		case kind == "device":
			m := kv(rest)
			d := p.Device(m["name"])
			if d == nil {
				d = &DeviceProfile{Name: m["name"], Ports: map[int][]PortStatic{}}
				p.Devices = append(p.Devices, d)
			}
			d.Uverbs, d.Provider, d.Library = m["uverbs"], m["provider"], m["lib"]
		case kind == "attr":
			m := kv(rest)
			d := p.Device(m["name"])
			b, err := hex.DecodeString(m["hex"])
			if d == nil || err != nil || len(b) != atoi(m, "len") {
				return p, fmt.Errorf("swift-profile: bad attr line for %q: %w", m["name"], errdefs.ErrDataLoss)
			}
			d.Attrs = append(d.Attrs, b)
		case kind == "port":
			m := kv(rest)
			d := p.Device(m["name"])
			if d == nil {
				return p, fmt.Errorf("swift-profile: port line before device %q: %w", m["name"], errdefs.ErrDataLoss)
			}
			n := atoi(m, "port")
			d.Ports[n] = append(d.Ports[n], PortStatic{
				MaxMTU: uint32(atou(m, "max_mtu")), GIDTblLen: int32(atoi(m, "gid_tbl_len")),
				PortCapFlags: uint32(atou(m, "port_cap_flags")), MaxMsgSz: uint32(atou(m, "max_msg_sz")),
				PkeyTblLen: uint16(atou(m, "pkey_tbl_len")), MaxVLNum: uint8(atou(m, "max_vl_num")),
				LinkLayer: uint8(atou(m, "link_layer")), PortCapFlags2: uint16(atou(m, "port_cap_flags2")),
			})
		}
	}
	if err := sc.Err(); err != nil {
		return p, fmt.Errorf("read swift-profile output: %w", err)
	}
	return p, nil
}

// Failed lists the runs that did not complete.
func (p Profile) Failed() []Run {
	var f []Run
	for _, r := range p.Runs {
		if r.Exit != 0 || r.Error != "" || r.Pingpong == "fail" {
			f = append(f, r)
		}
	}
	return f
}

// Median returns the median of v (the lower middle for an even count).
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[(len(s)-1)/2]
}

// Medians returns per-call medians in µs over the completed runs, plus
// "critical", "process" and "init".
func (p Profile) Medians() map[string]float64 {
	vals := map[string][]float64{}
	for _, r := range p.Runs {
		if r.Exit != 0 || r.Error != "" {
			continue
		}
		for c, v := range r.Calls {
			vals[c] = append(vals[c], v)
		}
		vals["critical"] = append(vals["critical"], r.CriticalUS)
		vals["process"] = append(vals["process"], r.ProcessUS)
		vals["init"] = append(vals["init"], r.InitUS)
	}
	m := map[string]float64{}
	for k, v := range vals {
		m[k] = Median(v)
	}
	return m
}

// Stable reports whether every run saw the same attributes for d (and at
// least one run saw them).
func (d *DeviceProfile) AttrStable() bool {
	if len(d.Attrs) == 0 {
		return false
	}
	for _, a := range d.Attrs[1:] {
		if !bytes.Equal(a, d.Attrs[0]) {
			return false
		}
	}
	return true
}

// PortsStatic returns the device's ports in order, each marked Stable when
// every run saw the same static fields.
func (d *DeviceProfile) PortsStatic() []PortStatic {
	var nums []int
	for n := range d.Ports {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	var out []PortStatic
	for i, n := range nums {
		if n != i+1 || len(out) == MaxPorts {
			break // ports are numbered 1..N; a gap ends what can be cached
		}
		runs := d.Ports[n]
		p := runs[0]
		p.Stable = true
		for _, q := range runs[1:] {
			if !q.sameStatic(runs[0]) {
				p.Stable = false
			}
		}
		out = append(out, p)
	}
	return out
}
