// Command swift-node is Swift's node agent. It runs the DRA driver
// rdma.swift.io (package dra) as a kubelet plugin: it publishes the node's
// RDMA devices in a ResourceSlice, prepares claims as their CDI names, and
// reports the devices' health to the kubelet. With --policy-configmap and
// --keys-secret it also installs the tenant policy and keyrings an operator
// keeps in Kubernetes onto the node as they change (package nodeconf).
//
//	swift-node --kubeconfig /etc/kubernetes/kubelet.conf --node-name "$(hostname)"
//
// It serves Prometheus metrics on --metrics-addr (package metrics): each
// tenant's leases and quota use, each zygote's pool, the shims' Create
// outcomes and latency (reported on a socket in the state dir that only
// root reaches), the devices' ports and the verbs cache's state, which it
// checks again whenever the devices change.
//
// `swift-node install` is the chart's installer DaemonSet (package
// nodeinstall): it puts Swift's binaries onto the node, adds its runtime
// entry to containerd's config, restarts containerd when that changed,
// labels the node, and undoes all of it when its DaemonSet is deleted.
// `swift-node uninstall-hook` is the chart's pre-delete hook that deletes
// that DaemonSet and waits for its pods to finish.
//
// Without --kubeconfig it uses the in-cluster configuration (a DaemonSet's
// service account). It needs the kubelet's plugin directories
// (/var/lib/kubelet/plugins_registry, /var/lib/kubelet/plugins) and writes
// the CDI spec of the node's devices into --cdi-dir.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/swift-rdma/swift-containerd/cdispec"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/dra"
	"github.com/swift-rdma/swift-containerd/internal/version"
	"github.com/swift-rdma/swift-containerd/ledger"
	"github.com/swift-rdma/swift-containerd/metrics"
	"github.com/swift-rdma/swift-containerd/nodeconf"
	"github.com/swift-rdma/swift-containerd/policy"
	"github.com/swift-rdma/swift-containerd/verbs"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "swift-node:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "install":
			return runInstall(args[1:])
		case "uninstall-hook":
			return runUninstallHook(args[1:])
		}
	}
	fs := flag.NewFlagSet("swift-node", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the agent's identity (default: in-cluster)")
	node := fs.String("node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	cfgPath := fs.String("config", config.PathFromEnv(), "Swift node config: its rdma.sys_root and rdma.dev_root, and where --policy-configmap and --keys-secret install (policy_path, keys_dir)")
	cdiDir := fs.String("cdi-dir", cdispec.DefaultDir, "where the CDI spec of the node's devices is written (one of containerd's cdi_spec_dirs)")
	pluginDir := fs.String("plugin-dir", filepath.Join(kubeletplugin.KubeletPluginsDir, dra.DriverName), "the kubelet plugin's directory")
	registryDir := fs.String("registry-dir", kubeletplugin.KubeletRegistryDir, "the kubelet's plugin registry")
	rescan := fs.Duration("rescan", 10*time.Second, "how often the devices and their ports are read again besides the kernel's netlink events (an InfiniBand port's state has none)")
	policyCM := fs.String("policy-configmap", "", "NAMESPACE/NAME of a ConfigMap whose "+nodeconf.PolicyKey+" is installed as the node's tenant policy (the node config's policy_path) as it changes")
	keysSecret := fs.String("keys-secret", "", "NAMESPACE/NAME of a Secret whose <tenant>.keys entries are installed into the node config's keys_dir as they change (rings that leave it are removed)")
	metricsAddr := fs.String("metrics-addr", ":9478", "address of the Prometheus metrics endpoint (/metrics), \"\" for none; the shims report Creates to the agent either way")
	logLevel := fs.String("log-level", "", "trace, debug, info, warn or error (default: the node config's log_level, else info)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println("swift-node", version.Version)
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *node == "" {
		return errors.New("--node-name (or $NODE_NAME) is required")
	}
	if *rescan < time.Second {
		return fmt.Errorf("--rescan %s: want at least 1s", *rescan)
	}
	polRef, err := nodeconf.ParseRef(*policyCM)
	if err != nil {
		return fmt.Errorf("--policy-configmap %w", err)
	}
	keysRef, err := nodeconf.ParseRef(*keysSecret)
	if err != nil {
		return fmt.Errorf("--keys-secret %w", err)
	}
	c, err := config.Load(*cfgPath)
	if err != nil && !(errors.Is(err, os.ErrNotExist) && *cfgPath == config.DefaultPath) {
		return err
	}
	if err != nil {
		c = config.Default()
	}
	if lvl := cmp.Or(*logLevel, c.LogLevel); lvl != "" {
		if err := log.SetLevel(lvl); err != nil {
			return fmt.Errorf("--log-level %q: %w", lvl, errdefs.ErrInvalidArgument)
		}
	}
	client, err := kubeClient(*kubeconfig)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	events, err := dra.Events(ctx)
	if err != nil {
		log.G(ctx).WithError(err).Warn("swift-node: some kernel events are not watched: the rescan sees what they would")
	}
	d := &dra.Driver{Node: *node, SysRoot: c.RDMA.SysRoot, DevRoot: c.RDMA.DevRoot, CDIDir: *cdiDir,
		StateDir: *pluginDir, Rescan: *rescan, Events: events, Fatal: cancel}
	if err := os.MkdirAll(*pluginDir, 0o750); err != nil {
		return err
	}
	if err := d.Load(ctx); err != nil {
		return err
	}
	h, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.KubeClient(client),
		kubeletplugin.NodeName(*node),
		kubeletplugin.DriverName(dra.DriverName),
		kubeletplugin.PluginDataDirectoryPath(*pluginDir),
		kubeletplugin.RegistrarDirectoryPath(*registryDir))
	if err != nil {
		return fmt.Errorf("start the kubelet plugin: %w", err)
	}
	defer h.Stop()
	if err := h.PublishResources(ctx, d.Resources()); err != nil {
		return fmt.Errorf("publish the node's devices: %w", err)
	}
	if polRef.Set() || keysRef.Set() {
		if polRef.Set() && c.PolicyFile() == "" {
			return fmt.Errorf("--policy-configmap: the node config %s names no policy_path to install it at: %w", *cfgPath, errdefs.ErrInvalidArgument)
		}
		in := &nodeconf.Installer{PolicyPath: c.PolicyFile(), KeysDir: c.KeysDir}
		nodeconf.Watch(ctx, client, in, polRef, keysRef, 5*time.Minute)
	}
	if err := serveMetrics(ctx, c, d, *metricsAddr); err != nil {
		return err
	}
	log.G(ctx).WithField("node", *node).WithField("driver", dra.DriverName).Info("swift-node: serving")
	d.Watch(ctx, func(ctx context.Context, r resourceslice.DriverResources) error {
		// the devices changed: the verbs cache describes the node as it was
		if v := verbsCache(c); v.State != verbs.StateValid {
			log.G(ctx).WithField("state", v.State).WithField("why", v.Why()).Warn("swift-node: the verbs cache no longer matches the node's devices: containers get stock libibverbs until `swiftctl cache build`")
		}
		return h.PublishResources(ctx, r)
	})
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func verbsCache(c config.Config) verbs.Result {
	return verbs.Check(verbs.Node{StateDir: c.StateDir, Sources: verbs.Sources{SysRoot: c.RDMA.SysRoot}})
}

// serveMetrics listens for the shims' Create reports in the state dir and
// serves the node's metrics on addr ("" for none) until ctx ends.
func serveMetrics(ctx context.Context, c config.Config, d *dra.Driver, addr string) error {
	col := metrics.NewCollector()
	col.StateDir = c.StateDir
	col.Quotas = func() (map[string]ledger.Amounts, error) {
		p, err := policy.LoadNode(c)
		if err != nil {
			return nil, err
		}
		return p.NodeQuotas(), nil
	}
	col.Devices = func() []metrics.DeviceState {
		var out []metrics.DeviceState
		for _, x := range d.Devices() {
			out = append(out, metrics.DeviceState{Name: x.Name, PortState: x.PortState})
		}
		return out
	}
	col.VerbsCache = func() string { return string(verbsCache(c).State) }
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return err
	}
	rx, err := metrics.Listen(metrics.SocketPath(c.StateDir))
	if err != nil {
		return err
	}
	go func() {
		defer rx.Close()
		rx.Serve(ctx, col.Observe, col.Drop)
	}()
	if addr == "" {
		return nil
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(col); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError,
		MaxRequestsInFlight: 4, Timeout: 10 * time.Second}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 20 * time.Second, MaxHeaderBytes: 16 << 10}
	context.AfterFunc(ctx, func() { srv.Close() })
	// a port taken (by a process that got there while the agent was
	// down) is waited for, not fatal: the DRA driver goes on meanwhile
	go func() {
		for {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				log.G(ctx).WithError(err).Error("swift-node: --metrics-addr: cannot listen; trying again in 5 s")
				select {
				case <-ctx.Done():
					return
				case <-time.After(5 * time.Second):
					continue
				}
			}
			log.G(ctx).WithField("addr", ln.Addr().String()).WithField("reports", rx.Path()).Info("swift-node: serving metrics")
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.G(ctx).WithError(err).Error("swift-node: the metrics endpoint stopped")
			}
			return
		}
	}()
	return nil
}
