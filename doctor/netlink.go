package doctor

import (
	"encoding/binary"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// RDMA netlink system attributes (include/uapi/rdma/rdma_netlink.h).
const (
	attrNetnsMode  = nl.RDMA_NLDEV_SYS_ATTR_NETNS_MODE // 66
	attrCopyOnFork = 93                                // RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK, kernel ≥ 5.13
)

// SystemInfo is the RDMA subsystem's answer to RDMA_NLDEV_CMD_SYS_GET.
type SystemInfo struct {
	// NetnsMode is "shared", "exclusive", or "" when not reported.
	NetnsMode string
	// CopyOnFork is nil when not reported.
	CopyOnFork *bool
}

// QueryRDMASystem sends RDMA_NLDEV_CMD_SYS_GET (what `rdma system show`
// does). netlink.RdmaSystemGetNetnsMode sends the same request but decodes
// only the netns mode, so the reply is decoded here.
func QueryRDMASystem() (SystemInfo, error) {
	proto := nl.RDMA_NL_NLDEV<<nl.RDMA_NL_GET_CLIENT_SHIFT | nl.RDMA_NLDEV_CMD_SYS_GET
	req := nl.NewNetlinkRequest(proto, unix.NLM_F_ACK)
	msgs, err := req.Execute(unix.NETLINK_RDMA, 0)
	if err != nil {
		return SystemInfo{}, fmt.Errorf("netlink RDMA_NLDEV_CMD_SYS_GET: %w", err)
	}
	if len(msgs) == 0 {
		return SystemInfo{}, fmt.Errorf("netlink RDMA_NLDEV_CMD_SYS_GET: no reply: %w", errdefs.ErrUnavailable)
	}
	return ParseSystemAttrs(msgs[0])
}

// ParseSystemAttrs decodes the attributes of a RDMA_NLDEV_CMD_SYS_GET reply.
func ParseSystemAttrs(b []byte) (SystemInfo, error) {
	var info SystemInfo
	for len(b) > 0 {
		if len(b) < unix.SizeofNlAttr {
			return info, fmt.Errorf("truncated netlink attribute (%d bytes): %w", len(b), errdefs.ErrInvalidArgument)
		}
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		typ := binary.NativeEndian.Uint16(b[2:4]) &^ (unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
		if l < unix.SizeofNlAttr || l > len(b) {
			return info, fmt.Errorf("netlink attribute %d: bad length %d of %d: %w", typ, l, len(b), errdefs.ErrInvalidArgument)
		}
		val := b[unix.SizeofNlAttr:l]
		switch typ {
		case attrNetnsMode:
			if len(val) < 1 {
				return info, fmt.Errorf("netlink attribute netns mode: empty: %w", errdefs.ErrInvalidArgument)
			}
			switch val[0] {
			case 0:
				info.NetnsMode = "exclusive"
			case 1:
				info.NetnsMode = "shared"
			default:
				info.NetnsMode = fmt.Sprintf("unknown (%d)", val[0])
			}
		case attrCopyOnFork:
			if len(val) < 1 {
				return info, fmt.Errorf("netlink attribute copy-on-fork: empty: %w", errdefs.ErrInvalidArgument)
			}
			on := val[0] != 0
			info.CopyOnFork = &on
		}
		next := (l + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if next > len(b) {
			next = len(b)
		}
		b = b[next:]
	}
	return info, nil
}
