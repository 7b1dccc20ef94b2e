package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/swift-rdma/swift-containerd/install"
	"github.com/swift-rdma/swift-containerd/nodeconf"
	"github.com/swift-rdma/swift-containerd/nodeinstall"
)

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// kubeClient is the agent's and the installer's client: kubeconfig's
// identity, else the pod's service account.
func kubeClient(kubeconfig string) (kubernetes.Interface, error) {
	var rc *rest.Config
	var err error
	if kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	return kubernetes.NewForConfig(rc)
}

// runInstall is `swift-node install`: the chart's installer DaemonSet.
// It installs Swift onto the node (package nodeinstall), reports ready,
// and waits; when stopped, it uninstalls if its DaemonSet is being
// deleted, and otherwise (an update, a drain) leaves Swift installed.
func runInstall(args []string) error {
	fs := flag.NewFlagSet("swift-node install", flag.ContinueOnError)
	var c nodeinstall.Config
	var restart string
	var waitFor stringList
	fs.StringVar(&c.HostRoot, "host-root", "/proc/1/root", "the node's root directory as this process sees it (a hostPID pod: /proc/1/root; on the node: /)")
	fs.StringVar(&c.From, "from", "/usr/local", "the prefix holding this image's bin/ and lib/swift")
	fs.StringVar(&c.Prefix, "prefix", "/usr/local", "where Swift goes on the node (PREFIX/bin, PREFIX/lib/swift; the node config's zygote.bin_dir must be PREFIX/lib/swift)")
	fs.StringVar(&c.StateDir, "state-dir", "/var/lib/swift-install", "the node directory of the install's manifest (what uninstall undoes)")
	fs.StringVar(&c.Containerd.ConfigPath, "containerd-config", install.DefaultConfigPath, "containerd's root config on the node")
	fs.StringVar(&c.Containerd.RuntimeName, "runtime-name", install.DefaultRuntimeName, "the runtime entry (the RuntimeClass's handler)")
	fs.StringVar(&c.Containerd.SwiftConfig, "swift-config", install.DefaultSwiftConfig, "the node config the runtime entry names")
	fs.IntVar(&c.Containerd.Version, "containerd-config-version", 0, "containerd's config version, when the node has no root config to read it from")
	fs.StringVar(&restart, "restart-command", "systemctl restart containerd", "the node's command that restarts containerd, run in the node's root when its config changed (\"\": none)")
	fs.DurationVar(&c.RestartTimeout, "restart-timeout", 2*time.Minute, "how long the restart command may take")
	fs.Var(&waitFor, "wait-for", "a node file that must exist before the node is labelled (repeatable)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: in-cluster)")
	node := fs.String("node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	label := fs.String("node-label", "swift.io/runtime=true", "KEY=VALUE set on the node once Swift is installed (\"\": none)")
	dsRef := fs.String("daemonset", "", "NAMESPACE/NAME of the installer's DaemonSet: stopped while it is being deleted, the installer uninstalls")
	readyFile := fs.String("ready-file", "/tmp/swift-installed", "file (in this container) made once installed: the readiness probe's")
	probe := fs.Bool("probe", false, "exit 0 if --ready-file exists (the readiness probe), else 1")
	logLevel := fs.String("log-level", "info", "trace, debug, info, warn or error")
	uninstallTimeout := fs.Duration("uninstall-timeout", 150*time.Second, "how long the uninstall may take once stopped (less than the pod's termination grace period)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *probe {
		if _, err := os.Stat(*readyFile); err != nil {
			return fmt.Errorf("not installed yet: %w", err)
		}
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: %w", fs.Args(), errdefs.ErrInvalidArgument)
	}
	if err := log.SetLevel(*logLevel); err != nil {
		return fmt.Errorf("--log-level %q: %w", *logLevel, errdefs.ErrInvalidArgument)
	}
	c.Restart = strings.Fields(restart)
	c.WaitFor = waitFor
	c.Owner = *dsRef
	ds, err := nodeconf.ParseRef(*dsRef)
	if err != nil {
		return fmt.Errorf("--daemonset %w", err)
	}
	var client kubernetes.Interface
	if *label != "" || ds.Set() {
		if client, err = kubeClient(*kubeconfig); err != nil {
			return err
		}
	}
	if *label != "" {
		k, v, _ := strings.Cut(*label, "=")
		l, err := nodeinstall.NewNodeLabel(client, *node, k, v)
		if err != nil {
			return fmt.Errorf("--node-label: %w", err)
		}
		c.Label = l
	}
	in, err := nodeinstall.New(c)
	if err != nil {
		return err
	}
	defer in.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// a failed install is tried again, not exited: the pod stays (not
	// ready) to undo what it did when its DaemonSet is deleted
	for backoff := 5 * time.Second; ; backoff = min(2*backoff, 2*time.Minute) {
		t0 := time.Now()
		res, err := in.Install(ctx)
		if err == nil {
			log.G(ctx).Infof("installed in %s: %d files written, containerd config changed %v, restarted %v, labelled %v",
				time.Since(t0).Round(time.Millisecond), res.FilesWritten, res.ContainerdChanged, res.Restarted, res.Labelled)
			if err := os.MkdirAll(filepath.Dir(*readyFile), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(*readyFile, nil, 0o644); err != nil {
				return err
			}
			break
		}
		if ctx.Err() != nil {
			log.G(ctx).WithError(err).Warn("stopped while installing")
			break
		}
		log.G(ctx).WithError(err).Errorf("install failed: trying again in %s", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		if ctx.Err() != nil {
			break
		}
	}
	<-ctx.Done()
	// from here on a further SIGTERM (the kubelet stops the container
	// again after containerd's restart) must not end the uninstall
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
	stop()
	// stopped: uninstall only when the DaemonSet is going away
	sctx, cancel := context.WithTimeout(context.Background(), *uninstallTimeout)
	defer cancel()
	if !ds.Set() {
		log.G(sctx).Info("stopped; no --daemonset: Swift stays installed")
		return nil
	}
	var departing bool
	for i := 0; ; i++ {
		departing, err = nodeinstall.Departing(sctx, client, ds.Namespace, ds.Name)
		if err == nil || i == 4 {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return fmt.Errorf("stopped, and whether the DaemonSet is being deleted is unknown: Swift stays installed: %w", err)
	}
	if !departing {
		log.G(sctx).Infof("stopped while daemonset %s stays: Swift stays installed", *dsRef)
		return nil
	}
	t0 := time.Now()
	res, err := in.Uninstall(sctx)
	if err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	log.G(sctx).Infof("uninstalled in %s: %d files removed, containerd config changed %v, restarted %v, label removed %v",
		time.Since(t0).Round(time.Millisecond), res.FilesRemoved, res.ContainerdChanged, res.Restarted, res.Labelled)
	return nil
}

// runUninstallHook is `swift-node uninstall-hook`: the chart's pre-delete
// hook. It deletes the installer's DaemonSet in the foreground and waits
// until its pods have uninstalled, before helm deletes their RBAC.
func runUninstallHook(args []string) error {
	fs := flag.NewFlagSet("swift-node uninstall-hook", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (default: in-cluster)")
	dsRef := fs.String("daemonset", "", "NAMESPACE/NAME of the installer's DaemonSet")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long its pods may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: %w", fs.Args(), errdefs.ErrInvalidArgument)
	}
	ds, err := nodeconf.ParseRef(*dsRef)
	if err == nil && !ds.Set() {
		err = fmt.Errorf("%q: want NAMESPACE/NAME: %w", *dsRef, errdefs.ErrInvalidArgument)
	}
	if err != nil {
		return fmt.Errorf("--daemonset %w", err)
	}
	client, err := kubeClient(*kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := nodeinstall.DeleteAndWait(ctx, client, ds.Namespace, ds.Name, 2*time.Second); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w: see the installer pods' logs", err)
		}
		return err
	}
	return nil
}
