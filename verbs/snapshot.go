package verbs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/containerd/errdefs"
)

// The snapshot layout; preload/snapshot.h documents it field by field and
// is the C reader. Both sides must change together (bump SnapshotVersion).
const (
	SnapshotMagic   = "SWIFTVB1"
	SnapshotVersion = 2
	MaxDevices      = 16
	MaxPorts        = 4
	AttrMax         = 512

	hdrSize  = 384
	devSize  = 848
	portSize = 32

	// MaxSnapshotSize is the largest valid snapshot file.
	MaxSnapshotSize = hdrSize + MaxDevices*devSize

	flagCopyOnFork = 1
	flagAttrStable = 1
	flagPortStable = 1
)

// Snapshot is what libswiftverbs.so serves: the fingerprint it validates
// at load, and the stable attributes of every device.
type Snapshot struct {
	Kernel     string
	RDMACore   string
	Drivers    []string // the node's stock provider names (added back when stale)
	CopyOnFork bool
	Devices    []SnapshotDevice
}

// SnapshotDevice is one device's fingerprint and cached attributes.
type SnapshotDevice struct {
	Name      string
	Uverbs    string
	Major     uint32
	Minor     uint32
	NodeGUID  string
	FWVersion string
	// Inode identifies the device's registration (FPDevice.Inode); 0: not
	// recorded, not checked.
	Inode uint64
	// AttrStable says Attr was identical over every profiling run; only
	// then does the preload serve it.
	AttrStable bool
	// Attr is struct ibv_device_attr_ex as ibv_query_device_ex returned it.
	Attr  []byte
	Ports []PortStatic
}

// PortStatic holds the fields of struct ibv_port_attr that do not change
// while the device exists. State, LID, active MTU/speed/width and the
// counters are dynamic and never cached.
type PortStatic struct {
	Stable        bool   `json:"stable"`
	MaxMTU        uint32 `json:"max_mtu"`
	GIDTblLen     int32  `json:"gid_tbl_len"`
	PortCapFlags  uint32 `json:"port_cap_flags"`
	MaxMsgSz      uint32 `json:"max_msg_sz"`
	PkeyTblLen    uint16 `json:"pkey_tbl_len"`
	MaxVLNum      uint8  `json:"max_vl_num"`
	LinkLayer     uint8  `json:"link_layer"`
	PortCapFlags2 uint16 `json:"port_cap_flags2"`
}

// sameStatic compares the static fields (not the Stable flag).
func (p PortStatic) sameStatic(q PortStatic) bool {
	p.Stable, q.Stable = false, false
	return p == q
}

func putString(b []byte, s, field string) error {
	if len(s) >= len(b) {
		return fmt.Errorf("snapshot: %s %q is longer than %d bytes: %w", field, s, len(b)-1, errdefs.ErrInvalidArgument)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("snapshot: %s %q contains a NUL byte: %w", field, s, errdefs.ErrInvalidArgument)
	}
	copy(b, s)
	return nil
}

// MarshalBinary encodes the snapshot.
func (s Snapshot) MarshalBinary() ([]byte, error) {
	if len(s.Devices) > MaxDevices {
		return nil, fmt.Errorf("snapshot: %d devices, at most %d: %w", len(s.Devices), MaxDevices, errdefs.ErrInvalidArgument)
	}
	size := hdrSize + len(s.Devices)*devSize
	b := make([]byte, size)
	le := binary.LittleEndian
	copy(b, SnapshotMagic)
	le.PutUint32(b[8:], SnapshotVersion)
	le.PutUint32(b[12:], uint32(size))
	le.PutUint32(b[24:], uint32(len(s.Devices)))
	var flags uint32
	if s.CopyOnFork {
		flags |= flagCopyOnFork
	}
	le.PutUint32(b[28:], flags)
	if err := putString(b[32:96], s.Kernel, "kernel release"); err != nil {
		return nil, err
	}
	if err := putString(b[96:128], s.RDMACore, "rdma-core version"); err != nil {
		return nil, err
	}
	if err := putString(b[128:384], strings.Join(s.Drivers, ":"), "driver list"); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, d := range s.Devices {
		if d.Name == "" || d.Uverbs == "" || strings.ContainsAny(d.Name+d.Uverbs, "/") ||
			strings.HasPrefix(d.Name, ".") || strings.HasPrefix(d.Uverbs, ".") {
			return nil, fmt.Errorf("snapshot: device %d has a bad name %q/%q: %w", i, d.Name, d.Uverbs, errdefs.ErrInvalidArgument)
		}
		if seen["n"+d.Name] || seen["u"+d.Uverbs] {
			return nil, fmt.Errorf("snapshot: device %s listed twice: %w", d.Name, errdefs.ErrInvalidArgument)
		}
		seen["n"+d.Name], seen["u"+d.Uverbs] = true, true
		if len(d.Attr) > AttrMax {
			return nil, fmt.Errorf("snapshot: device %s: %d attribute bytes, at most %d: %w", d.Name, len(d.Attr), AttrMax, errdefs.ErrInvalidArgument)
		}
		if len(d.Ports) > MaxPorts {
			return nil, fmt.Errorf("snapshot: device %s: %d ports, at most %d: %w", d.Name, len(d.Ports), MaxPorts, errdefs.ErrInvalidArgument)
		}
		o := b[hdrSize+i*devSize : hdrSize+(i+1)*devSize]
		for _, f := range []struct {
			dst        []byte
			val, field string
		}{
			{o[0:64], d.Name, "device name"}, {o[64:80], d.Uverbs, "uverbs name"},
			{o[88:120], d.NodeGUID, "node GUID"}, {o[120:184], d.FWVersion, "firmware version"},
		} {
			if err := putString(f.dst, f.val, f.field); err != nil {
				return nil, err
			}
		}
		le.PutUint32(o[80:], d.Major)
		le.PutUint32(o[84:], d.Minor)
		var df uint32
		if d.AttrStable {
			df |= flagAttrStable
		}
		le.PutUint32(o[184:], df)
		le.PutUint32(o[188:], uint32(len(d.Attr)))
		copy(o[192:192+AttrMax], d.Attr)
		le.PutUint32(o[704:], uint32(len(d.Ports)))
		for j, p := range d.Ports {
			q := o[712+j*portSize : 712+(j+1)*portSize]
			var pf uint32
			if p.Stable {
				pf |= flagPortStable
			}
			le.PutUint32(q[0:], pf)
			le.PutUint32(q[4:], p.MaxMTU)
			le.PutUint32(q[8:], uint32(p.GIDTblLen))
			le.PutUint32(q[12:], p.PortCapFlags)
			le.PutUint32(q[16:], p.MaxMsgSz)
			le.PutUint16(q[20:], p.PkeyTblLen)
			q[22] = p.MaxVLNum
			q[23] = p.LinkLayer
			le.PutUint16(q[24:], p.PortCapFlags2)
		}
		le.PutUint64(o[840:], d.Inode)
	}
	le.PutUint64(b[16:], checksum(b[24:]))
	return b, nil
}

func checksum(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

func corrupt(format string, a ...any) error {
	return fmt.Errorf("snapshot: "+format+": %w", append(a, errdefs.ErrDataLoss)...)
}

// getString reads a NUL-terminated field.
func getString(b []byte) (string, bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", false
	}
	return string(b[:i]), true
}

// ParseSnapshot decodes and validates a snapshot with the same rules as the
// C reader: any truncation, bad count, bad checksum or unterminated string
// is an ErrDataLoss error, never a panic.
func ParseSnapshot(b []byte) (Snapshot, error) {
	var s Snapshot
	le := binary.LittleEndian
	if len(b) < hdrSize {
		return s, corrupt("truncated (%d bytes)", len(b))
	}
	if string(b[:8]) != SnapshotMagic {
		return s, corrupt("bad magic")
	}
	if v := le.Uint32(b[8:]); v != SnapshotVersion {
		return s, corrupt("version %d, want %d (written by another Swift release: run swiftctl cache build)", v, SnapshotVersion)
	}
	size := le.Uint32(b[12:])
	if int(size) != len(b) {
		return s, corrupt("says %d bytes, file has %d (truncated?)", size, len(b))
	}
	ndev := le.Uint32(b[24:])
	if ndev > MaxDevices || int(size) != hdrSize+int(ndev)*devSize {
		return s, corrupt("bad device count %d for %d bytes", ndev, size)
	}
	if le.Uint64(b[16:]) != checksum(b[24:]) {
		return s, corrupt("checksum mismatch")
	}
	s.CopyOnFork = le.Uint32(b[28:])&flagCopyOnFork != 0
	var ok1, ok2, ok3 bool
	var drivers string
	s.Kernel, ok1 = getString(b[32:96])
	s.RDMACore, ok2 = getString(b[96:128])
	drivers, ok3 = getString(b[128:384])
	if !ok1 || !ok2 || !ok3 {
		return Snapshot{}, corrupt("unterminated string in the header")
	}
	if drivers != "" {
		s.Drivers = strings.Split(drivers, ":")
	}
	seen := map[string]bool{}
	for i := 0; i < int(ndev); i++ {
		o := b[hdrSize+i*devSize : hdrSize+(i+1)*devSize]
		var d SnapshotDevice
		var oks [4]bool
		d.Name, oks[0] = getString(o[0:64])
		d.Uverbs, oks[1] = getString(o[64:80])
		d.NodeGUID, oks[2] = getString(o[88:120])
		d.FWVersion, oks[3] = getString(o[120:184])
		if !oks[0] || !oks[1] || !oks[2] || !oks[3] || d.Name == "" || d.Uverbs == "" ||
			strings.Contains(d.Name+d.Uverbs, "/") || strings.HasPrefix(d.Name, ".") || strings.HasPrefix(d.Uverbs, ".") {
			return Snapshot{}, corrupt("device %d has a bad name field", i)
		}
		if seen["n"+d.Name] || seen["u"+d.Uverbs] {
			return Snapshot{}, corrupt("device %s listed twice", d.Name)
		}
		seen["n"+d.Name], seen["u"+d.Uverbs] = true, true
		d.Major, d.Minor = le.Uint32(o[80:]), le.Uint32(o[84:])
		d.AttrStable = le.Uint32(o[184:])&flagAttrStable != 0
		n := le.Uint32(o[188:])
		if n > AttrMax {
			return Snapshot{}, corrupt("device %s: attr_len %d > %d", d.Name, n, AttrMax)
		}
		d.Attr = append([]byte(nil), o[192:192+n]...)
		np := le.Uint32(o[704:])
		if np > MaxPorts {
			return Snapshot{}, corrupt("device %s: %d ports > %d", d.Name, np, MaxPorts)
		}
		for j := 0; j < int(np); j++ {
			q := o[712+j*portSize : 712+(j+1)*portSize]
			d.Ports = append(d.Ports, PortStatic{
				Stable:        le.Uint32(q[0:])&flagPortStable != 0,
				MaxMTU:        le.Uint32(q[4:]),
				GIDTblLen:     int32(le.Uint32(q[8:])),
				PortCapFlags:  le.Uint32(q[12:]),
				MaxMsgSz:      le.Uint32(q[16:]),
				PkeyTblLen:    le.Uint16(q[20:]),
				MaxVLNum:      q[22],
				LinkLayer:     q[23],
				PortCapFlags2: le.Uint16(q[24:]),
			})
		}
		d.Inode = le.Uint64(o[840:])
		s.Devices = append(s.Devices, d)
	}
	return s, nil
}
