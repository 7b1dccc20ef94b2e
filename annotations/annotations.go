package annotations

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
)

// Prefix is the annotation namespace of the Swift runtime.
const Prefix = "swift.io/"

// Keys of the swift.io/ annotations.
const (
	RDMA    = Prefix + "rdma"
	Tenant  = Prefix + "tenant"
	Devices = Prefix + "devices"
	Pool    = Prefix + "pool"
	Peers   = Prefix + "peers"
	Verbs   = Prefix + "verbs"
	Zygote  = Prefix + "zygote"
	Name    = Prefix + "name"
	Listen  = Prefix + "listen"
	// RemoteAccess lets a zygote's peers RDMA READ and WRITE its QPs' slices.
	RemoteAccess = Prefix + "remote-access"
	// ZygoteContainer names the one container of a pod that runs the
	// zygote (pod annotations reach every container of the pod).
	ZygoteContainer = Prefix + "zygote-container"
)

// CRI annotations naming a container and its pod.
const (
	CRIContainerName = "io.kubernetes.cri.container-name"
	CRISandboxName   = "io.kubernetes.cri.sandbox-name"
)

// CRIContainerType is the CRI annotation that marks the sandbox (pause) container.
const CRIContainerType = "io.kubernetes.cri.container-type"

// Known lists every key this version understands, in documentation order.
var Known = []string{RDMA, Tenant, Devices, Pool, Peers, Verbs, Zygote, ZygoteContainer, Name, Listen, RemoteAccess}

// Peer is one entry of swift.io/peers.
type Peer struct {
	Name string
	Host string
	Port uint16
}

// Options is what a container asked for.
type Options struct {
	// RDMA is the swift.io/rdma opt-in; nil when the annotation is absent.
	RDMA    *bool
	Tenant  string
	Devices []string
	Pool    int
	Peers   []Peer
	Verbs   string
	Zygote  *bool
	// Name is how peers know this container's zygote (swift.io/name).
	Name string
	// Listen is the zygote's QP exchange address (swift.io/listen).
	ListenHost string
	ListenPort uint16
	// RemoteAccess is swift.io/remote-access: pool QPs and slices allow
	// RDMA READ and WRITE from the connected peer (default: SEND and RECV only).
	RemoteAccess bool
	// ZygoteContainer is swift.io/zygote-container: in a pod, the name of
	// the one container that runs the zygote.
	ZygoteContainer string
	// Given lists the swift.io/ keys present, sorted.
	Given []string
}

// Enabled tells whether the container opts in, given the node default.
func (o Options) Enabled(nodeDefault bool) bool {
	if o.RDMA != nil {
		return *o.RDMA
	}
	return nodeDefault
}

func invalid(key, value, format string, args ...any) error {
	return fmt.Errorf("annotation %s=%q: %s: %w", key, value, fmt.Sprintf(format, args...), errdefs.ErrInvalidArgument)
}

// Parse reads the swift.io/ annotations of a container. Other annotations are ignored.
func Parse(annotations map[string]string) (Options, error) {
	var o Options
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		if strings.HasPrefix(k, Prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	o.Given = keys
	for _, k := range keys {
		v := annotations[k]
		var err error
		switch k {
		case RDMA:
			o.RDMA, err = parseBool(k, v)
		case Zygote:
			o.Zygote, err = parseBool(k, v)
		case Tenant:
			if !IsLabel(v) {
				err = invalid(k, v, "want a lowercase DNS label (a-z, 0-9, '-', at most 63 characters)")
			}
			o.Tenant = v
		case Devices:
			o.Devices, err = parseDevices(k, v)
		case Pool:
			n, perr := strconv.Atoi(v)
			if perr != nil || n < 1 || n > MaxPool {
				err = invalid(k, v, "want a whole number of QPs per peer from 1 to %d", MaxPool)
			}
			o.Pool = n
		case Peers:
			o.Peers, err = parsePeers(k, v)
		case Name:
			if !IsZygoteName(v) {
				err = invalid(k, v, "want a lowercase DNS label (a-z, 0-9, '-', at most 63 characters), or one qualified by a namespace, name.namespace")
			}
			o.Name = v
		case Listen:
			o.ListenHost, o.ListenPort, err = parseListen(k, v)
		case ZygoteContainer:
			if !IsLabel(v) {
				err = invalid(k, v, "want a container name (a lowercase DNS label)")
			}
			o.ZygoteContainer = v
		case RemoteAccess:
			var b *bool
			if b, err = parseBool(k, v); b != nil {
				o.RemoteAccess = *b
			}
		case Verbs:
			if v != "cached" && v != "trimmed" && v != "stock" {
				err = invalid(k, v, "want cached, trimmed or stock")
			}
			o.Verbs = v
		default:
			err = invalid(k, v, "unknown key; known keys are %s", strings.Join(Known, ", "))
		}
		if err != nil {
			return Options{}, err
		}
	}
	// what swift-init would refuse (swift-limits.h), refused here
	if len(o.Peers) > MaxPeers {
		return Options{}, invalid(Peers, annotations[Peers], "%d peers; a zygote takes at most %d", len(o.Peers), MaxPeers)
	}
	if pool := max(o.Pool, 1); pool*len(o.Peers) > MaxQPs {
		return Options{}, invalid(Pool, annotations[Pool], "%d QPs per peer × %d peers = %d QPs; a zygote's pool holds at most %d",
			pool, len(o.Peers), pool*len(o.Peers), MaxQPs)
	}
	if o.RDMA != nil && !*o.RDMA {
		for _, k := range keys {
			if k != RDMA {
				return Options{}, invalid(k, annotations[k], "given while %s=false; remove it or opt in", RDMA)
			}
		}
	}
	return o, nil
}

func parseBool(k, v string) (*bool, error) {
	switch v {
	case "true":
		b := true
		return &b, nil
	case "false":
		b := false
		return &b, nil
	}
	return nil, invalid(k, v, "want true or false")
}

func parseDevices(k, v string) ([]string, error) {
	if v == "" {
		return nil, invalid(k, v, "want a comma-separated list of RDMA device names")
	}
	var out []string
	seen := map[string]bool{}
	for _, d := range strings.Split(v, ",") {
		d = strings.TrimSpace(d)
		if !IsDeviceName(d) {
			return nil, invalid(k, v, "%q is not an RDMA device name", d)
		}
		if seen[d] {
			return nil, invalid(k, v, "device %q listed twice", d)
		}
		seen[d] = true
		out = append(out, d)
	}
	return out, nil
}

func parsePeers(k, v string) ([]Peer, error) {
	if v == "" {
		return nil, invalid(k, v, "want name=host:port,...")
	}
	var out []Peer
	seen := map[string]bool{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		name, addr, ok := strings.Cut(item, "=")
		if !ok || !IsZygoteName(name) {
			return nil, invalid(k, v, "%q is not name=host:port with a lowercase DNS-label name, or one qualified by a namespace (name.namespace)", item)
		}
		if seen[name] {
			return nil, invalid(k, v, "peer %q listed twice", name)
		}
		seen[name] = true
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, invalid(k, v, "peer %q: address %q is not host:port", name, addr)
		}
		if net.ParseIP(host) == nil && !IsHostName(host) {
			return nil, invalid(k, v, "peer %q: %q is not an IP address or host name", name, host)
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			return nil, invalid(k, v, "peer %q: port %q is not 1-65535", name, port)
		}
		out = append(out, Peer{Name: name, Host: host, Port: uint16(p)})
	}
	return out, nil
}

// parseListen accepts "PORT" or "IPv4:PORT".
func parseListen(k, v string) (string, uint16, error) {
	host, port := "0.0.0.0", v
	if h, p, err := net.SplitHostPort(v); err == nil {
		host, port = h, p
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() == nil {
		return "", 0, invalid(k, v, "want PORT or IPv4:PORT")
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return "", 0, invalid(k, v, "port %q is not 1-65535", port)
	}
	// the address as swift-init reads it (dotted quad, also for an
	// IPv4-mapped ::ffff:a.b.c.d), and as the ledger compares it
	return ip.To4().String(), uint16(p), nil
}
