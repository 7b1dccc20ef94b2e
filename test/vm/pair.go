package vm

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// A pair is two guests joined by one virtual L2 link: a qemu dgram netdev,
// UDP on the host's loopback (no bridge, no host networking beyond qemu's
// two sockets), each guest with rxe0 on that link, its own containerd and
// the Swift shim. The guests run the same scenarios, each doing its node's
// part; they meet at barriers through a directory both mount (SharedMount).
//
// The link is dgram, not the socket (TCP) netdev: over TCP, rxe's small
// back-to-back packets meet Nagle and the 40 ms delayed ACK (measured: a
// 256-byte RC round trip 46 ms over TCP, 0.85 ms over UDP).
const (
	NodeA, NodeB = "a", "b"
	NodeAIP      = "10.0.3.1"
	NodeBIP      = "10.0.3.2"
	SharedMount  = "/run/swiftvm-shared"
)

// IsPairScenario tells whether a scenario runs on a pair (its name starts
// with "x-", for cross-node).
func IsPairScenario(name string) bool { return strings.HasPrefix(name, "x-") }

// Pair is a finished boot of both guests.
type Pair struct {
	Dir  string
	A, B *Run
}

// PreparePair fills dir/a and dir/b (each guest's results share, as
// Prepare does for one) and dir/shared.
func PreparePair(ctx context.Context, c Config, dir string, logw io.Writer) error {
	if err := os.MkdirAll(filepath.Join(dir, "shared"), 0o755); err != nil {
		return err
	}
	for _, n := range []struct{ node, ip, peer, peerIP string }{
		{NodeA, NodeAIP, NodeB, NodeBIP}, {NodeB, NodeBIP, NodeA, NodeAIP},
	} {
		d := filepath.Join(dir, n.node)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		extra := map[string]string{"SWIFTVM_NODE": n.node, "SWIFTVM_NODE_IP": n.ip, "SWIFTVM_PEER": n.peer,
			"SWIFTVM_PEER_IP": n.peerIP, "SWIFTVM_SHARED": "1"}
		if err := prepare(ctx, c, d, extra, logw); err != nil {
			return fmt.Errorf("node %s: %w", n.node, err)
		}
	}
	return nil
}

// freePorts returns n ports of network (udp4 or tcp4) on 127.0.0.1 that
// were free a moment ago.
func freePorts(network string, n int) ([]int, error) {
	var open []io.Closer
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		if network == "udp4" {
			c, err := net.ListenPacket(network, "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			open = append(open, c)
			ports = append(ports, c.LocalAddr().(*net.UDPAddr).Port)
			continue
		}
		l, err := net.Listen(network, "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		open = append(open, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// BootPair boots both guests at once, joined by their link, and waits for
// both to power off. progress sees every console marker with its node.
// kubelets, when not nil, maps a node's link address to a host port: that
// guest gets a second NIC (eth1, qemu's user-mode network, leading to the
// host's loopback) with the port forwarded to its kubelet (x-k8s).
func BootPair(ctx context.Context, c Config, g Guest, dir string, kubelets map[string]int,
	progress func(node string, m Marker)) (*Pair, error) {
	ports, err := freePorts("udp4", 2)
	if err != nil {
		return nil, fmt.Errorf("ports for the link: %w", err)
	}
	shared := filepath.Join(dir, "shared")
	p := &Pair{Dir: dir}
	c.CPUs = c.PairCPUs
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, node := range []string{NodeA, NodeB} {
		local, remote := ports[i], ports[1-i]
		netArgs := []string{
			"-netdev", fmt.Sprintf("dgram,id=link,local.type=inet,local.host=127.0.0.1,local.port=%d,"+
				"remote.type=inet,remote.host=127.0.0.1,remote.port=%d", local, remote),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=link,mac=52:54:00:5a:00:%02x", i+1),
			"-virtfs", "local,path=" + shared + ",mount_tag=shared,security_model=none,multidevs=remap",
		}
		if kubelets != nil {
			ip := []string{NodeAIP, NodeBIP}[i]
			netArgs = append(netArgs,
				"-netdev", fmt.Sprintf("user,id=cp,net=10.0.2.0/24,hostfwd=tcp:127.0.0.1:%d-:%d", kubelets[ip], kubeletPort),
				"-device", fmt.Sprintf("virtio-net-pci,netdev=cp,mac=52:54:00:5a:01:%02x", i+1))
		}
		wg.Add(1)
		go func(i int, node string) {
			defer wg.Done()
			r, err := boot(ctx, c, g, filepath.Join(dir, node), netArgs, func(m Marker) {
				if progress != nil {
					progress(node, m)
				}
			})
			if node == NodeA {
				p.A = r
			} else {
				p.B = r
			}
			errs[i] = err
		}(i, node)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return p, fmt.Errorf("node %s: %w", []string{NodeA, NodeB}[i], err)
		}
	}
	return p, nil
}

// Result is a pair scenario's outcome: PASS only if both nodes passed;
// facts of both, as "a.KEY" and "b.KEY".
func (p *Pair) Result(name string) Result {
	ra, rb := p.A.Result(name), p.B.Result(name)
	res := ra
	res.Facts = map[string]string{}
	for k, v := range ra.Facts {
		res.Facts[NodeA+"."+k] = v
	}
	for k, v := range rb.Facts {
		res.Facts[NodeB+"."+k] = v
	}
	switch {
	case ra.Status == "PASS" && rb.Status == "PASS":
	case ra.Status == "PASS":
		res.Status, res.ExitCode, res.TimedOut, res.LogPath = rb.Status, rb.ExitCode, rb.TimedOut, rb.LogPath
	}
	if rb.Seconds > res.Seconds {
		res.Seconds = rb.Seconds
	}
	return res
}

// Completed reports whether both guests finished the batch.
func (p *Pair) Completed() bool {
	return p.A != nil && p.B != nil && p.A.Completed() && p.B.Completed()
}
