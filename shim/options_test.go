package shim

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types/runc/options"
	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"github.com/pelletier/go-toml/v2"
)

const allRuncOptions = `BinaryName = "/usr/bin/crun"
Root = "/run/swift-runc"
SystemdCgroup = true
NoPivotRoot = true
NoNewKeyring = true
ShimCgroup = "/swift"
IoUid = 1000
IoGid = 1001
CriuImagePath = "/var/lib/criu/img"
CriuWorkPath = "/var/lib/criu/work"
`

func TestParseRuntimeOptions(t *testing.T) {
	tests := []struct {
		name, body string
		want       RuntimeOptions
	}{
		{"empty", "", RuntimeOptions{}},
		{"comment", "# nothing set\n", RuntimeOptions{}},
		{"every runc key", allRuncOptions, RuntimeOptions{
			BinaryName: "/usr/bin/crun", Root: "/run/swift-runc", SystemdCgroup: true, NoPivotRoot: true,
			NoNewKeyring: true, ShimCgroup: "/swift", IoUid: 1000, IoGid: 1001,
			CriuImagePath: "/var/lib/criu/img", CriuWorkPath: "/var/lib/criu/work",
		}},
		{"SwiftConfig", `SwiftConfig = "/etc/swift/gpu.toml"` + "\nSystemdCgroup = true",
			RuntimeOptions{SwiftConfig: "/etc/swift/gpu.toml", SystemdCgroup: true}},
		{"max uid", "IoUid = 4294967295", RuntimeOptions{IoUid: 4294967295}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRuntimeOptions("opts", []byte(tc.body))
			if err != nil {
				t.Fatalf("ParseRuntimeOptions(%q): %v", tc.body, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseRuntimeOptions(%q)\n got %+v\nwant %+v", tc.body, got, tc.want)
			}
		})
	}
}

func TestParseRuntimeOptionsErrors(t *testing.T) {
	tests := []struct {
		name, body string
		msg        []string
	}{
		{"unknown key", "BinaryName = \"runc\"\nBinaryPath = \"/x\"", []string{"BinaryPath", "unknown key"}},
		{"two unknown keys", "Foo = 1\nbar = 2", []string{"Foo", "bar"}},
		{"unknown table", "[extra]\nx = 1", []string{"extra"}},
		{"bad toml", "BinaryName = ", nil},
		{"unterminated", "BinaryName = \"crun", nil},
		{"wrong type", "SystemdCgroup = \"yes\"", nil},
		{"negative uid", "IoUid = -1", nil},
		{"duplicate", "Root = \"a\"\nRoot = \"b\"", nil},
		{"table through a string", "[Root.x]", nil},
		{"table through a bool", "[SystemdCgroup.x.y]", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const name = "/etc/containerd/swift-options.toml"
			_, err := ParseRuntimeOptions(name, []byte(tc.body))
			assertRefused(t, fmt.Sprintf("ParseRuntimeOptions(%q)", tc.body), err, errdefs.IsInvalidArgument,
				append([]string{name}, tc.msg...)...)
		})
	}
}

func TestRuntimeOptionsRunc(t *testing.T) {
	o, err := ParseRuntimeOptions("x", []byte(allRuncOptions+"SwiftConfig = \"/c.toml\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := o.runc()
	if r.BinaryName != o.BinaryName || r.Root != o.Root || r.SystemdCgroup != o.SystemdCgroup ||
		r.NoPivotRoot != o.NoPivotRoot || r.NoNewKeyring != o.NoNewKeyring || r.ShimCgroup != o.ShimCgroup ||
		r.IoUid != o.IoUid || r.IoGid != o.IoGid || r.CriuImagePath != o.CriuImagePath || r.CriuWorkPath != o.CriuWorkPath {
		t.Fatalf("runc() = %+v does not carry %+v", r, o)
	}
}

func FuzzParseRuntimeOptions(f *testing.F) {
	f.Add("ConfigBody", []byte(allRuncOptions))
	f.Add("ConfigBody", []byte("SwiftConfig = \"/etc/swift/a.toml\"\n"))
	f.Add("/etc/x.toml", []byte("Foo = 1\n[bar]\nbaz = 2\n"))
	f.Add("n", []byte("IoUid = -1\nIoGid = 4294967296\n"))
	f.Add("n", []byte("BinaryName = 'crun\n"))
	f.Add("", []byte("BinaryName = \"\\u00e9\\t\"\nRoot = '''\nmulti\nline'''\n"))
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		o, err := ParseRuntimeOptions(name, body)
		if err != nil {
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("ParseRuntimeOptions(%q): error %q is not InvalidArgument", body, err)
			}
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("ParseRuntimeOptions(%q): error %q does not contain the name %q", body, err, name)
			}
			return
		}
		// Accepted options survive a round trip and reach the runc options.
		out, err := toml.Marshal(o)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", o, err)
		}
		o2, err := ParseRuntimeOptions(name, out)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", out, err)
		}
		if o2 != o {
			t.Fatalf("round trip: %+v became %+v", o, o2)
		}
		r := o.runc()
		if r.BinaryName != o.BinaryName || r.Root != o.Root || r.SystemdCgroup != o.SystemdCgroup ||
			r.IoUid != o.IoUid || r.IoGid != o.IoGid || r.ShimCgroup != o.ShimCgroup {
			t.Fatalf("runc() = %+v does not carry %+v", r, o)
		}
	})
}

func marshalAny(t *testing.T, v any) *taskapi.CreateTaskRequest {
	t.Helper()
	a, err := typeurl.MarshalAnyToProto(v)
	if err != nil {
		t.Fatal(err)
	}
	return &taskapi.CreateTaskRequest{ID: "c1", Bundle: "/run/b", Options: a}
}

// runcOptions decodes r.Options, which must be runc options.
func runcOptions(t *testing.T, r *taskapi.CreateTaskRequest) *options.Options {
	t.Helper()
	v, err := typeurl.UnmarshalAny(r.Options)
	if err != nil {
		t.Fatalf("unmarshal r.Options: %v", err)
	}
	o, ok := v.(*options.Options)
	if !ok {
		t.Fatalf("r.Options holds %T (%s), want runc options", v, r.Options.GetTypeUrl())
	}
	return o
}

func TestConvertOptionsNil(t *testing.T) {
	r := &taskapi.CreateTaskRequest{ID: "c1", Bundle: "/run/b"}
	ro, err := ConvertOptions(r)
	if err != nil {
		t.Fatal(err)
	}
	if ro != (RuntimeOptions{}) || r.Options != nil {
		t.Fatalf("ConvertOptions(nil options) = %+v, options now %v", ro, r.Options)
	}
}

func TestConvertOptionsRuncUnchanged(t *testing.T) {
	r := marshalAny(t, &options.Options{BinaryName: "/usr/bin/crun", SystemdCgroup: true, TaskApiVersion: 3})
	orig := r.Options
	origURL, origValue := orig.GetTypeUrl(), bytes.Clone(orig.GetValue())
	ro, err := ConvertOptions(r)
	if err != nil {
		t.Fatal(err)
	}
	if ro != (RuntimeOptions{}) {
		t.Errorf("ConvertOptions(runc) returned %+v, want zero", ro)
	}
	if r.Options != orig || r.Options.GetTypeUrl() != origURL || !bytes.Equal(r.Options.GetValue(), origValue) {
		t.Fatalf("runc options were replaced or changed")
	}
	if o := runcOptions(t, r); o.BinaryName != "/usr/bin/crun" || !o.SystemdCgroup || o.TaskApiVersion != 3 {
		t.Fatalf("runc options now %+v", o)
	}
}

func TestConvertOptionsConfigBody(t *testing.T) {
	r := marshalAny(t, &runtimeoptions.Options{
		TypeUrl:    "io.containerd.swift.v2.options",
		ConfigBody: []byte("BinaryName = \"/usr/bin/crun\"\nSystemdCgroup = true\nSwiftConfig = \"/etc/swift/b.toml\"\n"),
	})
	ro, err := ConvertOptions(r)
	if err != nil {
		t.Fatal(err)
	}
	want := RuntimeOptions{BinaryName: "/usr/bin/crun", SystemdCgroup: true, SwiftConfig: "/etc/swift/b.toml"}
	if ro != want {
		t.Errorf("ConvertOptions = %+v, want %+v", ro, want)
	}
	o := runcOptions(t, r)
	if o.BinaryName != "/usr/bin/crun" || !o.SystemdCgroup || o.Root != "" || o.NoPivotRoot || o.IoUid != 0 {
		t.Fatalf("runc options = %+v", o)
	}
}

func TestConvertOptionsAllKeys(t *testing.T) {
	r := marshalAny(t, &runtimeoptions.Options{ConfigBody: []byte(allRuncOptions)})
	if _, err := ConvertOptions(r); err != nil {
		t.Fatal(err)
	}
	o := runcOptions(t, r)
	got := RuntimeOptions{
		BinaryName: o.BinaryName, Root: o.Root, SystemdCgroup: o.SystemdCgroup, NoPivotRoot: o.NoPivotRoot,
		NoNewKeyring: o.NoNewKeyring, ShimCgroup: o.ShimCgroup, IoUid: o.IoUid, IoGid: o.IoGid,
		CriuImagePath: o.CriuImagePath, CriuWorkPath: o.CriuWorkPath,
	}
	want, _ := ParseRuntimeOptions("", []byte(allRuncOptions))
	if got != want || want.BinaryName == "" {
		t.Fatalf("runc options carry %+v, want %+v", got, want)
	}
}

func TestConvertOptionsConfigPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "opts.toml")
	if err := os.WriteFile(path, []byte("Root = \"/run/r\"\nSwiftConfig = \"/etc/swift/c.toml\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := marshalAny(t, &runtimeoptions.Options{ConfigPath: path})
	ro, err := ConvertOptions(r)
	if err != nil {
		t.Fatal(err)
	}
	if ro != (RuntimeOptions{Root: "/run/r", SwiftConfig: "/etc/swift/c.toml"}) {
		t.Errorf("ConvertOptions = %+v", ro)
	}
	if o := runcOptions(t, r); o.Root != "/run/r" {
		t.Errorf("runc options = %+v", o)
	}

	// ConfigBody wins over ConfigPath.
	r = marshalAny(t, &runtimeoptions.Options{ConfigPath: path, ConfigBody: []byte(`Root = "/body"`)})
	if ro, err := ConvertOptions(r); err != nil || ro.Root != "/body" {
		t.Errorf("ConvertOptions(body and path) = %+v, %v; want Root from the body", ro, err)
	}

	// Errors in the file name the file.
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("Rooot = \"/x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = marshalAny(t, &runtimeoptions.Options{ConfigPath: bad})
	orig := r.Options
	if _, err := ConvertOptions(r); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "Rooot") {
		t.Errorf("ConvertOptions(bad file) = %v, want InvalidArgument naming %s and Rooot", err, bad)
	}
	if r.Options != orig {
		t.Error("r.Options replaced despite the error")
	}

	// A missing file.
	missing := filepath.Join(dir, "absent.toml")
	r = marshalAny(t, &runtimeoptions.Options{ConfigPath: missing})
	if _, err := ConvertOptions(r); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), missing) {
		t.Errorf("ConvertOptions(missing file) = %v, want InvalidArgument naming %s", err, missing)
	}
}

func TestConvertOptionsEmptyRuntimeOptions(t *testing.T) {
	r := marshalAny(t, &runtimeoptions.Options{})
	ro, err := ConvertOptions(r)
	if err != nil || ro != (RuntimeOptions{}) {
		t.Fatalf("ConvertOptions(empty) = %+v, %v", ro, err)
	}
	if o := runcOptions(t, r); o.BinaryName != "" || o.SystemdCgroup {
		t.Fatalf("runc options = %+v, want zero", o)
	}
}

func TestConvertOptionsErrors(t *testing.T) {
	unknownURL := marshalAny(t, &runtimeoptions.Options{})
	unknownURL.Options.TypeUrl = "example.com/not.a.Type"
	tests := []struct {
		name string
		r    *taskapi.CreateTaskRequest
		msg  []string
	}{
		{"unknown key in body", marshalAny(t, &runtimeoptions.Options{ConfigBody: []byte("SystemdCgroups = true")}),
			[]string{"ConfigBody", "SystemdCgroups"}},
		{"bad toml in body", marshalAny(t, &runtimeoptions.Options{ConfigBody: []byte("BinaryName = ")}),
			[]string{"ConfigBody"}},
		{"unsupported type", marshalAny(t, &taskapi.DeleteRequest{ID: "x"}),
			[]string{"containerd.task.v3.DeleteRequest", "not supported"}},
		{"unregistered type", unknownURL, []string{"example.com/not.a.Type"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := tc.r.Options
			origValue := bytes.Clone(orig.GetValue())
			_, err := ConvertOptions(tc.r)
			assertRefused(t, "ConvertOptions", err, errdefs.IsInvalidArgument, tc.msg...)
			if tc.r.Options != orig || !bytes.Equal(tc.r.Options.GetValue(), origValue) {
				t.Error("r.Options changed despite the error")
			}
		})
	}
}

// TestRuncOptionsBytes: the shim's start converts runtimeoptions to runc
// options and passes everything else on unchanged: no options, bytes that
// are no Any, an Any of a type it does not know, runc options.
func TestRuncOptionsBytes(t *testing.T) {
	enc := func(a *anypb.Any) []byte {
		b, err := proto.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	runc := enc(marshalAny(t, &options.Options{BinaryName: "runc-x"}).Options)
	unknown := enc(&anypb.Any{TypeUrl: "quota-50", Value: []byte("x")})
	for _, in := range [][]byte{nil, {0xff, 0x01}, unknown, runc} {
		out, err := runcOptionsBytes(in)
		if err != nil || !bytes.Equal(out, in) {
			t.Errorf("runcOptionsBytes(%x) = %x, %v; want it unchanged", in, out, err)
		}
	}
	ro := enc(marshalAny(t, &runtimeoptions.Options{ConfigBody: []byte("BinaryName = \"runc-y\"\n")}).Options)
	out, err := runcOptionsBytes(ro)
	if err != nil {
		t.Fatal(err)
	}
	var a anypb.Any
	if err := proto.Unmarshal(out, &a); err != nil {
		t.Fatal(err)
	}
	if o := runcOptions(t, &taskapi.CreateTaskRequest{Options: &a}); o.BinaryName != "runc-y" {
		t.Errorf("converted options: BinaryName %q, want runc-y", o.BinaryName)
	}
	if _, err := runcOptionsBytes(enc(marshalAny(t, &runtimeoptions.Options{ConfigBody: []byte("Bogus = 1\n")}).Options)); !errdefs.IsInvalidArgument(err) {
		t.Errorf("bad runtimeoptions at start: %v, want InvalidArgument", err)
	}
}
