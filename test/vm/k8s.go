package vm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The Kubernetes bed: a real control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) runs natively on the host, where
// it is not emulated, and a kubelet runs on each guest of the pair against
// that guest's containerd (scenario x-k8s). The guests reach the API server
// through a second NIC, qemu's user-mode network, whose gateway 10.0.2.2
// leads to the host's loopback only. The API server reaches a kubelet
// (exec, logs) at the node's address on the pair's link, which the host is
// not on: its "cluster" egress goes through an HTTP CONNECT proxy on a
// Unix socket (the egress selector, as konnectivity does) that turns a
// node's link address into that guest's forwarded kubelet port.
const (
	// EnvK8sBin names the directory of the Kubernetes binaries (make deps
	// builds them: scripts/deps-k8s.sh).
	EnvK8sBin = "SWIFT_K8S_BIN"
	// K8sVersion is what every node and component must report.
	K8sVersion = "v1.37.2"
	// HostFromGuest is the host's loopback as a guest's user-mode NIC sees it.
	HostFromGuest = "10.0.2.2"
	// K8sGuestIP is a guest's address on its user-mode NIC.
	K8sGuestIP  = "10.0.2.15"
	kubeletPort = 10250
	// ServiceCIDR is the cluster's service range.
	ServiceCIDR = "10.96.0.0/16"
)

// K8sBinaries are the binaries the bed runs, all from one directory.
var K8sBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl",
	"generic-device-plugin", "coredns"}

// CoreDNSUser is the identity of the nodes' CoreDNS, and CoreDNSRBAC its
// rights: what its kubernetes plugin watches (CoreDNS's own deployment
// manifests grant the same).
const (
	CoreDNSUser = "system:swift-bed:coredns"
	CoreDNSRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: swift-bed:coredns
rules:
  - apiGroups: [""]
    resources: [endpoints, services, pods, namespaces]
    verbs: [list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: swift-bed:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: swift-bed:coredns
subjects:
  - apiGroup: rbac.authorization.k8s.io
    kind: User
    name: ` + CoreDNSUser + `
`
)

// ControlPlane is a running control plane on the host.
type ControlPlane struct {
	Dir        string // certificates, kubeconfigs, logs, etcd data
	BinDir     string
	Server     string // https://127.0.0.1:PORT, the host's address of the API server
	GuestURL   string // https://10.0.2.2:PORT, the guests'
	Kubeconfig string // the admin's (system:masters)
	// KubeletFwd maps a node's link address to the host port forwarded to
	// its kubelet; the guests' qemu hostfwd must use these.
	KubeletFwd map[string]int

	procs  []*exec.Cmd
	egress net.Listener
	wg     sync.WaitGroup
}

// MissingK8s lists what the bed needs from dir and lacks.
func MissingK8s(dir string) []string {
	if dir == "" {
		return []string{"$" + EnvK8sBin + " is not set (make deps builds Kubernetes into /var/cache/swift-build/k8s-1.37.2)"}
	}
	var missing []string
	for _, b := range K8sBinaries {
		if !isExecFile(filepath.Join(dir, b)) {
			missing = append(missing, filepath.Join(dir, b)+" (make deps builds it: scripts/deps-k8s.sh)")
		}
	}
	return missing
}

// pki is the bed's certificate authority.
type pki struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func newPKI(dir string) (*pki, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "swift-vm-k8s-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, "ca.crt"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return &pki{dir: dir, cert: cert, key: key, next: 2}, nil
}

// newKey makes a P-256 key and writes it to path (PEM).
func newKey(path string) (*ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return key, writePEM(path, "EC PRIVATE KEY", der)
}

// certSpec is a certificate the bed issues: a client certificate for cn
// in orgs, also a server one when hosts (IPs or DNS names) are given.
type certSpec struct {
	name, cn string
	orgs     []string
	hosts    []string
}

// issue writes c.name.crt and c.name.key.
func (p *pki) issue(c certSpec) error {
	key, err := newKey(filepath.Join(p.dir, c.name+".key"))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.next), Subject: pkix.Name{CommonName: c.cn, Organization: c.orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	p.next++
	if len(c.hosts) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		for _, h := range c.hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		return err
	}
	return writePEM(filepath.Join(p.dir, c.name+".crt"), "CERTIFICATE", der)
}

// kubeconfig writes path: server, the CA, and the client certificate name.
func (p *pki) kubeconfig(path, server, name string) error {
	read := func(f string) (string, error) {
		b, err := os.ReadFile(filepath.Join(p.dir, f))
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err := read("ca.crt")
	if err != nil {
		return err
	}
	crt, err := read(name + ".crt")
	if err != nil {
		return err
	}
	key, err := read(name + ".key")
	if err != nil {
		return err
	}
	y := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: swift-vm
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: swift-vm
  context: {cluster: swift-vm, user: %s}
current-context: swift-vm
`, server, ca, name, crt, key, name)
	return os.WriteFile(path, []byte(y), 0o600)
}

// StartControlPlane makes the bed's PKI in dir, writes each node's
// kubeconfig to nodeDir(node)/kubeconfig (with ca.crt beside it) and starts
// etcd, the API server, the controller manager and the scheduler. nodes
// maps node names to their link addresses. It returns once the API server
// answers /readyz.
func StartControlPlane(ctx context.Context, binDir, dir string, nodes map[string]string,
	nodeDir func(string) string) (*ControlPlane, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts("tcp4", 3+len(nodes))
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]
	cp := &ControlPlane{
		Dir: dir, BinDir: binDir,
		Server:     fmt.Sprintf("https://127.0.0.1:%d", apiPort),
		GuestURL:   fmt.Sprintf("https://%s:%d", HostFromGuest, apiPort),
		Kubeconfig: filepath.Join(dir, "admin.kubeconfig"),
		KubeletFwd: map[string]int{},
	}
	i := 3
	for _, ip := range nodes {
		cp.KubeletFwd[ip] = ports[i]
		i++
	}
	p, err := newPKI(dir)
	if err != nil {
		return nil, fmt.Errorf("bed CA: %w", err)
	}
	certs := []certSpec{
		{"apiserver", "kube-apiserver", nil, []string{"127.0.0.1", HostFromGuest, "10.96.0.1", "localhost",
			"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}},
		{"admin", "swift-vm-admin", []string{"system:masters"}, nil},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil},
		{"controller-manager", "system:kube-controller-manager", nil, nil},
		{"scheduler", "system:kube-scheduler", nil, nil},
		// the nodes' cluster DNS (CoreDNS; its rights: CoreDNSRBAC)
		{"coredns", CoreDNSUser, nil, nil},
	}
	for n := range nodes {
		certs = append(certs, certSpec{"node-" + n, "system:node:" + n, []string{"system:nodes"}, nil})
	}
	for _, c := range certs {
		if err := p.issue(c); err != nil {
			return nil, fmt.Errorf("certificate %s: %w", c.name, err)
		}
	}
	// the service-account token signing key
	sa, err := newKey(filepath.Join(dir, "sa.key"))
	if err != nil {
		return nil, err
	}
	pubDer, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pubDer); err != nil {
		return nil, err
	}
	for _, k := range []struct{ file, cert, server string }{
		{"admin.kubeconfig", "admin", cp.Server},
		{"controller-manager.kubeconfig", "controller-manager", cp.Server},
		{"scheduler.kubeconfig", "scheduler", cp.Server},
	} {
		if err := p.kubeconfig(filepath.Join(dir, k.file), k.server, k.cert); err != nil {
			return nil, err
		}
	}
	for n := range nodes {
		nd := nodeDir(n)
		if err := os.MkdirAll(nd, 0o755); err != nil {
			return nil, err
		}
		if err := p.kubeconfig(filepath.Join(nd, "kubeconfig"), cp.GuestURL, "node-"+n); err != nil {
			return nil, err
		}
		if err := p.kubeconfig(filepath.Join(nd, "coredns.kubeconfig"), cp.GuestURL, "coredns"); err != nil {
			return nil, err
		}
		ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(nd, "ca.crt"), ca, 0o644); err != nil {
			return nil, err
		}
	}

	// the egress proxy: the API server's way to the kubelets
	sock := filepath.Join(dir, "egress.sock")
	if cp.egress, err = net.Listen("unix", sock); err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	cp.wg.Add(1)
	go func() {
		defer cp.wg.Done()
		cp.serveEgress()
	}()
	egressCfg := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, sock)
	if err := os.WriteFile(filepath.Join(dir, "egress.yaml"), []byte(egressCfg), 0o644); err != nil {
		return nil, err
	}

	f := func(n string) string { return filepath.Join(dir, n) }
	if err := cp.start(ctx, "etcd", "--name", "bed", "--data-dir", f("etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-cluster", fmt.Sprintf("bed=http://127.0.0.1:%d", peerPort),
		"--listen-metrics-urls", "", "--log-level", "warn"); err != nil {
		return cp, err
	}
	if err := cp.start(ctx, "kube-apiserver",
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", etcdPort),
		"--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(apiPort),
		// the guests' way to it; no endpoint reconciler, which wants an
		// address of its own
		"--advertise-address", HostFromGuest, "--endpoint-reconciler-type", "none",
		"--service-cluster-ip-range", ServiceCIDR,
		"--client-ca-file", f("ca.crt"), "--tls-cert-file", f("apiserver.crt"), "--tls-private-key-file", f("apiserver.key"),
		"--kubelet-client-certificate", f("apiserver-kubelet-client.crt"), "--kubelet-client-key", f("apiserver-kubelet-client.key"),
		"--service-account-key-file", f("sa.pub"), "--service-account-signing-key-file", f("sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--authorization-mode", "Node,RBAC", "--allow-privileged=true",
		// a kubelet by its node's address (the egress proxy's map), not
		// by its host name, which only the node itself resolves
		"--kubelet-preferred-address-types", "InternalIP",
		"--egress-selector-config-file", f("egress.yaml")); err != nil {
		return cp, err
	}
	if err := cp.waitReady(ctx, 90*time.Second); err != nil {
		return cp, err
	}
	if err := cp.start(ctx, "kube-controller-manager", "--kubeconfig", f("controller-manager.kubeconfig"),
		"--authentication-kubeconfig", f("controller-manager.kubeconfig"),
		"--authorization-kubeconfig", f("controller-manager.kubeconfig"),
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0",
		"--service-account-private-key-file", f("sa.key"), "--root-ca-file", f("ca.crt"),
		"--use-service-account-credentials=true"); err != nil {
		return cp, err
	}
	if err := cp.start(ctx, "kube-scheduler", "--kubeconfig", f("scheduler.kubeconfig"),
		"--authentication-kubeconfig", f("scheduler.kubeconfig"),
		"--authorization-kubeconfig", f("scheduler.kubeconfig"),
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", "0"); err != nil {
		return cp, err
	}
	return cp, nil
}

// start runs one component, its output in Dir/NAME.log.
func (cp *ControlPlane) start(ctx context.Context, name string, args ...string) error {
	logf, err := os.Create(filepath.Join(cp.Dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(cp.BinDir, name), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = cp.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	logf.Close()
	cp.procs = append(cp.procs, cmd)
	return nil
}

// waitReady waits until the API server answers /readyz with ok.
func (cp *ControlPlane) waitReady(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		out, err := cp.Kubectl(ctx, "get", "--raw", "/readyz")
		if err == nil && strings.TrimSpace(out) == "ok" {
			return nil
		}
		last = strings.TrimSpace(out)
		if err != nil {
			last = err.Error()
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("the API server was not ready within %s: %s; kube-apiserver.log:\n%s", within, last,
		tailFile(filepath.Join(cp.Dir, "kube-apiserver.log"), 20))
}

// Kubectl runs kubectl as the admin and returns its combined output.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) (string, error) {
	return cp.KubectlIn(ctx, "", args...)
}

// KubectlIn is Kubectl with stdin.
func (cp *ControlPlane) KubectlIn(ctx context.Context, stdin string, args ...string) (string, error) {
	// beyond any --timeout the checks give kubectl (4m at most)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(cp.BinDir, "kubectl"), append([]string{"--kubeconfig", cp.Kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// serveEgress is the HTTP CONNECT proxy the API server dials kubelets
// through: CONNECT <node link address>:10250 is a connection to that
// guest's forwarded kubelet port; anything else is refused.
func (cp *ControlPlane) serveEgress() {
	for {
		c, err := cp.egress.Accept()
		if err != nil {
			return
		}
		cp.wg.Add(1)
		go func() {
			defer cp.wg.Done()
			cp.proxy(c)
		}()
	}
}

func (cp *ControlPlane) proxy(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	host, port, err := net.SplitHostPort(req.Host)
	fwd, ok := cp.KubeletFwd[host]
	if err != nil || req.Method != http.MethodConnect || port != strconv.Itoa(kubeletPort) || !ok {
		fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\n\r\n")
		return
	}
	up, err := net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", fwd), 10*time.Second)
	if err != nil {
		fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	fmt.Fprintf(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() {
		if br.Buffered() > 0 {
			b, _ := br.Peek(br.Buffered())
			up.Write(b)
		}
		io.Copy(up, c)
		if t, ok := up.(*net.TCPConn); ok {
			t.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		io.Copy(c, up)
		if u, ok := c.(*net.UnixConn); ok {
			u.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

// Stop kills every component and the proxy.
func (cp *ControlPlane) Stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		p := cp.procs[i]
		if p.Process != nil {
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			_ = p.Wait()
		}
	}
	if cp.egress != nil {
		cp.egress.Close()
	}
	cp.wg.Wait()
}

// ErrK8sTimeout marks a wait of the bed that ran out.
var ErrK8sTimeout = errors.New("timed out")
