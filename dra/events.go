package dra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/containerd/log"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// rdmaGroupNotify is RDMA_NL_GROUP_NOTIFY (uapi rdma/rdma_netlink.h): the
// RDMA netlink monitor's multicast group (Linux 6.3 and later): a device
// registered, unregistered or renamed, a netdev attached or detached.
const rdmaGroupNotify = 4

// Events returns a channel that receives when the kernel reports a change
// that may add, remove or rename a device or move its port state: a
// link's state (rtnetlink's link group; a RoCE port follows its netdev)
// or the RDMA netlink monitor group. Events are coalesced: one pending at
// most. A source the kernel does not offer is named in the error, and the
// channel serves the others (nil when there are none). Both end with ctx.
// InfiniBand port changes have no netlink event: the rescan sees them.
func Events(ctx context.Context) (<-chan struct{}, error) {
	ch := make(chan struct{}, 1)
	kick := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	var errs []error
	ok := 0
	subscribe := func() (chan netlink.LinkUpdate, error) {
		links := make(chan netlink.LinkUpdate, 256)
		return links, netlink.LinkSubscribeWithOptions(links, ctx.Done(), netlink.LinkSubscribeOptions{
			ErrorCallback: func(err error) {
				// the library reports its socket's closing at ctx's end as a
				// receive error
				if ctx.Err() == nil {
					log.G(ctx).WithError(err).Warn("rtnetlink link events")
				}
			},
		})
	}
	if links, err := subscribe(); err != nil {
		errs = append(errs, fmt.Errorf("rtnetlink link events: %w", err))
	} else {
		ok++
		go func() {
			for {
				for range links {
					kick()
				}
				// the subscription ends on a receive error (a full socket
				// buffer, say): scan, and subscribe again
				if ctx.Err() != nil {
					return
				}
				kick()
				log.G(ctx).Warn("rtnetlink link events ended: subscribing again")
				for {
					select {
					case <-ctx.Done():
						return
					case <-time.After(time.Second):
					}
					var err error
					if links, err = subscribe(); err == nil {
						break
					}
					log.G(ctx).WithError(err).Warn("rtnetlink link events")
				}
			}
		}()
	}
	if f, err := rdmaMonitor(); err != nil {
		errs = append(errs, fmt.Errorf("rdma netlink monitor events: %w", err))
	} else {
		ok++
		go func() { <-ctx.Done(); f.Close() }()
		go func() {
			buf := make([]byte, 8192)
			for {
				_, err := f.Read(buf)
				if errors.Is(err, unix.ENOBUFS) {
					kick() // events were lost: scan anyway
					continue
				}
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, os.ErrClosed) {
						log.G(ctx).WithError(err).Warn("rdma netlink monitor events ended")
					}
					return
				}
				kick()
			}
		}()
	}
	if ok == 0 {
		return nil, errors.Join(errs...)
	}
	return ch, errors.Join(errs...)
}

// rdmaMonitor opens a NETLINK_RDMA socket in the monitor group, as a file
// the runtime's poller reads (closing it ends a blocked Read).
func rdmaMonitor() (*os.File, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_RDMA)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, rdmaGroupNotify); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("join group %d (RDMA_NL_GROUP_NOTIFY, Linux 6.3 and later): %w", rdmaGroupNotify, err)
	}
	return os.NewFile(uintptr(fd), "rdma-netlink-monitor"), nil
}
