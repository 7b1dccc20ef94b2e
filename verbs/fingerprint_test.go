package verbs

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// fakeDev is one device of a fake sysfs tree.
type fakeDev struct {
	name, uverbs, dev, guid, fw string
}

var (
	rxe0 = fakeDev{"rxe0", "uverbs0", "231:192", "0200:00ff:fe00:0001", "1.0.0"}
	rxe1 = fakeDev{"rxe1", "uverbs1", "231:193", "0200:00ff:fe00:0002", ""}
)

// fakeNode writes a sysfs tree (files only, no root needed) and a
// libibverbs.so.1 symlink, and returns Sources for it.
func fakeNode(t *testing.T, devs ...fakeDev) Sources {
	t.Helper()
	root := t.TempDir()
	write := func(rel, val string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(val+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sys/class/infiniband_verbs/abi_version", "6")
	for _, d := range devs {
		write("sys/class/infiniband_verbs/"+d.uverbs+"/ibdev", d.name)
		write("sys/class/infiniband_verbs/"+d.uverbs+"/dev", d.dev)
		write("sys/class/infiniband/"+d.name+"/node_guid", d.guid)
		if d.fw != "" {
			write("sys/class/infiniband/"+d.name+"/fw_ver", d.fw)
		}
	}
	lib := filepath.Join(root, "lib")
	write("lib/libibverbs.so.1.14.44.0", "")
	if err := os.Symlink("libibverbs.so.1.14.44.0", filepath.Join(lib, "libibverbs.so.1")); err != nil {
		t.Fatal(err)
	}
	return Sources{SysRoot: root, Release: "6.1.0-swift-test", LibDirs: []string{filepath.Join(root, "nolib"), lib}}
}

func TestCollect(t *testing.T) {
	src := fakeNode(t, rxe1, rxe0)
	f, err := Collect(src)
	if err != nil {
		t.Fatal(err)
	}
	// Inode is the class entry's inode number (the registration)
	for i := range f.Devices {
		var st syscall.Stat_t
		p := filepath.Join(src.SysRoot, "sys/class/infiniband_verbs", f.Devices[i].Uverbs)
		if err := syscall.Lstat(p, &st); err != nil || f.Devices[i].Inode != st.Ino || st.Ino == 0 {
			t.Errorf("%s: Inode %d, lstat %d (%v)", f.Devices[i].Name, f.Devices[i].Inode, st.Ino, err)
		}
		f.Devices[i].Inode = 0
	}
	want := Fingerprint{Kernel: "6.1.0-swift-test", RDMACore: "44.0", Devices: []FPDevice{
		{Name: "rxe0", Uverbs: "uverbs0", Dev: "231:192", NodeGUID: "0200:00ff:fe00:0001", FWVersion: "1.0.0"},
		{Name: "rxe1", Uverbs: "uverbs1", Dev: "231:193", NodeGUID: "0200:00ff:fe00:0002"},
	}}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("Collect:\n got %+v\nwant %+v", f, want)
	}
	// no RDMA at all: an empty fingerprint, not an error
	empty := Sources{SysRoot: t.TempDir(), Release: "r", LibDirs: []string{}}
	f, err = Collect(empty)
	if err != nil || len(f.Devices) != 0 || f.RDMACore != RDMACoreUnknown {
		t.Fatalf("Collect(no rdma) = %+v, %v", f, err)
	}
	// the real node's release when none is given
	f, err = Collect(Sources{SysRoot: t.TempDir()})
	if err != nil || f.Kernel == "" {
		t.Fatalf("Collect(uname) = %+v, %v", f, err)
	}
}

func TestCollectBadIbdev(t *testing.T) {
	src := fakeNode(t, rxe0)
	p := filepath.Join(src.SysRoot, "sys/class/infiniband_verbs/uverbs0/ibdev")
	if err := os.WriteFile(p, []byte("../x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Collect(src); err == nil || !strings.Contains(err.Error(), "no valid device") {
		t.Fatalf("Collect(ibdev ../x) = %v", err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := Collect(src); err == nil {
		t.Fatal("Collect(no ibdev file): want error")
	}
}

func TestVersionFromSoname(t *testing.T) {
	for in, want := range map[string]string{
		"libibverbs.so.1.14.44.0": "44.0",
		"libibverbs.so.1.5.25.1":  "25.1",
		"libibverbs.so.1.0.0":     "1.0.0",
		"libibverbs.so.1":         "1",
		"libibverbs.so.":          RDMACoreUnknown,
		"libfoo.so":               RDMACoreUnknown,
	} {
		if got := versionFromSoname(in); got != want {
			t.Errorf("versionFromSoname(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFingerprintID(t *testing.T) {
	src := fakeNode(t, rxe1, rxe0)
	a, _ := Collect(src)
	b, _ := Collect(src)
	if a.ID() != b.ID() || len(a.ID()) != 16 {
		t.Fatalf("same node, IDs %q and %q", a.ID(), b.ID())
	}
	c, _ := Collect(fakeNode(t, rxe0))
	if c.ID() == a.ID() {
		t.Fatal("different nodes, same ID")
	}
	// rxe0 registered again: same files, a new class entry
	dir := filepath.Join(src.SysRoot, "sys/class/infiniband_verbs/uverbs0")
	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ibdev", "dev"} {
		if err := os.Rename(filepath.Join(dir+".old", f), filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := Collect(src)
	if d.ID() == a.ID() {
		t.Fatal("device registered again, same ID")
	}
	if got := fmt.Sprint(Diff(a, d)); !strings.Contains(got, "device rxe0 (uverbs0) was registered again since the cache was built") {
		t.Fatalf("Diff after registering again: %s", got)
	}
}

func TestDiff(t *testing.T) {
	base, err := Collect(fakeNode(t, rxe0, rxe1))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(*Fingerprint)) Fingerprint {
		c := base
		c.Devices = append([]FPDevice(nil), base.Devices...)
		f(&c)
		return c
	}
	cases := []struct {
		name string
		live Fingerprint
		want []string
	}{
		{"same", base, nil},
		{"kernel", edit(func(f *Fingerprint) { f.Kernel = "6.2" }), []string{"kernel release changed: 6.1.0-swift-test -> 6.2"}},
		{"rdma-core", edit(func(f *Fingerprint) { f.RDMACore = "45.0" }), []string{"rdma-core changed: 44.0 -> 45.0"}},
		{"added", edit(func(f *Fingerprint) {
			f.Devices = append(f.Devices, FPDevice{Name: "rxe2", Uverbs: "uverbs2", Dev: "231:194"})
		}), []string{"device rxe2 (uverbs2) added"}},
		{"removed", edit(func(f *Fingerprint) { f.Devices = f.Devices[:1] }), []string{"device rxe1 (uverbs1) removed"}},
		{"renumbered", edit(func(f *Fingerprint) { f.Devices[0].Dev = "231:200"; f.Devices[0].Uverbs = "uverbs8" }),
			[]string{"device rxe0: uverbs node changed: uverbs0 -> uverbs8", "device rxe0: device number changed: 231:192 -> 231:200"}},
		{"guid and fw", edit(func(f *Fingerprint) { f.Devices[1].NodeGUID = "g"; f.Devices[1].FWVersion = "2" }),
			[]string{"device rxe1: node GUID changed: 0200:00ff:fe00:0002 -> g", "device rxe1: firmware changed:  -> 2"}},
		{"registered again", edit(func(f *Fingerprint) { f.Devices[1].Inode = base.Devices[1].Inode + 7 }),
			[]string{fmt.Sprintf("device rxe1 (uverbs1) was registered again since the cache was built (class entry inode %d -> %d)",
				base.Devices[1].Inode, base.Devices[1].Inode+7)}},
		// a fingerprint from before inodes were recorded: not compared
		{"no inode", edit(func(f *Fingerprint) { f.Devices[1].Inode = 0 }), nil},
	}
	for _, tc := range cases {
		got := Diff(base, tc.live)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Diff = %q, want %q", tc.name, got, tc.want)
		}
	}
	// both directions of a device swap are reported
	swapped := edit(func(f *Fingerprint) { f.Devices[1] = FPDevice{Name: "siw0", Uverbs: "uverbs1", Dev: "231:193"} })
	if got := fmt.Sprint(Diff(base, swapped)); !strings.Contains(got, "rxe1 (uverbs1) removed") || !strings.Contains(got, "siw0 (uverbs1) added") {
		t.Errorf("swap: %s", got)
	}
}
