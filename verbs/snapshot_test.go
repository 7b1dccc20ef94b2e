package verbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

var update = flag.Bool("update", false, "rewrite ../preload/testdata/snapshot-v2.bin")

// goldenPath is read by preload/unit_test.c too: both readers must agree.
const goldenPath = "../preload/testdata/snapshot-v2.bin"

// fixtureSnapshot is the snapshot preload/unit_test.c expects in the golden file.
func fixtureSnapshot() Snapshot {
	attr0 := make([]byte, 400)
	for i := range attr0 {
		attr0[i] = byte(i*7 + 1)
	}
	attr1 := make([]byte, 232)
	for i := range attr1 {
		attr1[i] = byte(255 - i)
	}
	return Snapshot{
		Kernel: "6.1.0-swift-test", RDMACore: "44.0", Drivers: []string{"mlx5", "rxe", "siw"}, CopyOnFork: true,
		Devices: []SnapshotDevice{
			{Name: "rxe0", Uverbs: "uverbs0", Major: 231, Minor: 192, NodeGUID: "0200:00ff:fe00:0001", FWVersion: "1.0.0",
				Inode: 0x1_0000_4131, AttrStable: true, Attr: attr0,
				Ports: []PortStatic{{Stable: true, MaxMTU: 5, GIDTblLen: 32, PortCapFlags: 0x890000, MaxMsgSz: 0x800000,
					PkeyTblLen: 1, MaxVLNum: 1, LinkLayer: 2, PortCapFlags2: 0x20}}},
			{Name: "rxe1", Uverbs: "uverbs1", Major: 231, Minor: 193, NodeGUID: "0200:00ff:fe00:0002", Attr: attr1},
		},
	}
}

func TestSnapshotGolden(t *testing.T) {
	b, err := fixtureSnapshot().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("%v (go test ./verbs -run Golden -update writes it)", err)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoding differs from %s (layout changed? bump SnapshotVersion and update preload/snapshot.h)", goldenPath)
	}
	if len(b) != hdrSize+2*devSize {
		t.Fatalf("size %d, want %d", len(b), hdrSize+2*devSize)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	for _, s := range []Snapshot{
		fixtureSnapshot(),
		{Kernel: "k"},
		{Kernel: "k", Devices: []SnapshotDevice{{Name: "mlx5_0", Uverbs: "uverbs3", Ports: []PortStatic{{}, {Stable: true, GIDTblLen: -1}, {}, {}}}}},
	} {
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseSnapshot(b)
		if err != nil {
			t.Fatal(err)
		}
		// nil and empty slices decode the same way
		norm := func(s Snapshot) Snapshot {
			for i := range s.Devices {
				if len(s.Devices[i].Attr) == 0 {
					s.Devices[i].Attr = nil
				}
			}
			return s
		}
		if !reflect.DeepEqual(norm(got), norm(s)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, s)
		}
	}
}

func TestSnapshotMarshalRefuses(t *testing.T) {
	long := strings.Repeat("x", 64)
	for name, s := range map[string]Snapshot{
		"too many devices": {Devices: make([]SnapshotDevice, MaxDevices+1)},
		"long kernel":      {Kernel: strings.Repeat("k", 64)},
		"long name":        {Devices: []SnapshotDevice{{Name: long, Uverbs: "uverbs0"}}},
		"empty name":       {Devices: []SnapshotDevice{{Uverbs: "uverbs0"}}},
		"slash":            {Devices: []SnapshotDevice{{Name: "a/b", Uverbs: "uverbs0"}}},
		"dot":              {Devices: []SnapshotDevice{{Name: "..", Uverbs: "uverbs0"}}},
		"nul":              {Kernel: "a\x00b"},
		"big attr":         {Devices: []SnapshotDevice{{Name: "a", Uverbs: "uverbs0", Attr: make([]byte, AttrMax+1)}}},
		"five ports":       {Devices: []SnapshotDevice{{Name: "a", Uverbs: "uverbs0", Ports: make([]PortStatic, 5)}}},
		"twice":            {Devices: []SnapshotDevice{{Name: "a", Uverbs: "uverbs0"}, {Name: "a", Uverbs: "uverbs1"}}},
		"drivers":          {Drivers: []string{strings.Repeat("d", 256)}},
	} {
		if _, err := s.MarshalBinary(); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: MarshalBinary = %v, want InvalidArgument", name, err)
		}
	}
}

// reseal fixes the checksum after an edit, so that the deeper checks run.
func reseal(b []byte) []byte {
	binary.LittleEndian.PutUint64(b[16:], checksum(b[24:]))
	return b
}

func TestParseSnapshotCorrupt(t *testing.T) {
	good, err := fixtureSnapshot().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() []byte { return append([]byte(nil), good...) }
	// Every truncation and every single flipped byte is refused, never a panic.
	for n := 0; n < len(good); n++ {
		if _, err := ParseSnapshot(good[:n]); !errors.Is(err, errdefs.ErrDataLoss) {
			t.Fatalf("truncated to %d bytes: %v, want DataLoss", n, err)
		}
	}
	for i := 0; i < len(good); i++ {
		b := fresh()
		b[i] ^= 0x5a
		if _, err := ParseSnapshot(b); !errors.Is(err, errdefs.ErrDataLoss) {
			t.Fatalf("byte %d flipped: %v, want DataLoss", i, err)
		}
	}
	le := binary.LittleEndian
	cases := []struct {
		name string
		edit func([]byte) []byte
		msg  string
	}{
		{"magic", func(b []byte) []byte { copy(b, "SWIFTVB2"); return b }, "bad magic"},
		{"version", func(b []byte) []byte { le.PutUint32(b[8:], 1); return reseal(b) }, "version 1, want 2"},
		{"size field", func(b []byte) []byte { le.PutUint32(b[12:], uint32(len(b)+1)); return reseal(b) }, "truncated"},
		{"appended", func(b []byte) []byte { return append(b, 0) }, "truncated"},
		{"device count", func(b []byte) []byte { le.PutUint32(b[24:], 3); return reseal(b) }, "bad device count"},
		{"device count huge", func(b []byte) []byte { le.PutUint32(b[24:], 1<<31); return reseal(b) }, "bad device count"},
		{"checksum", func(b []byte) []byte { b[100] = 'x'; return b }, "checksum"},
		{"kernel unterminated", func(b []byte) []byte { copy(b[32:96], strings.Repeat("k", 64)); return reseal(b) }, "unterminated"},
		{"name unterminated", func(b []byte) []byte { copy(b[hdrSize:hdrSize+64], strings.Repeat("n", 64)); return reseal(b) }, "bad name"},
		{"name slash", func(b []byte) []byte { copy(b[hdrSize:], "a/b\x00"); return reseal(b) }, "bad name"},
		{"name empty", func(b []byte) []byte { b[hdrSize] = 0; return reseal(b) }, "bad name"},
		{"duplicate", func(b []byte) []byte { copy(b[hdrSize+devSize:], "rxe0\x00"); return reseal(b) }, "twice"},
		{"attr_len", func(b []byte) []byte { le.PutUint32(b[hdrSize+188:], AttrMax+1); return reseal(b) }, "attr_len"},
		{"nports", func(b []byte) []byte { le.PutUint32(b[hdrSize+704:], MaxPorts+1); return reseal(b) }, "ports"},
	}
	for _, tc := range cases {
		_, err := ParseSnapshot(tc.edit(fresh()))
		if !errors.Is(err, errdefs.ErrDataLoss) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want DataLoss containing %q", tc.name, err, tc.msg)
		}
	}
}

func FuzzParseSnapshot(f *testing.F) {
	good, _ := fixtureSnapshot().MarshalBinary()
	f.Add(good)
	f.Add([]byte{})
	f.Add(good[:hdrSize])
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSnapshot(b)
		if err != nil {
			return
		}
		// Whatever parses re-encodes to the same bytes.
		again, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("parsed snapshot does not re-encode: %v", err)
		}
		if s2, err := ParseSnapshot(again); err != nil || !reflect.DeepEqual(len(s2.Devices), len(s.Devices)) {
			t.Fatalf("re-encoded snapshot: %v", err)
		}
	})
}
