// Command swift-gateway answers HTTP requests with fork starts from the
// container's Swift zygote: OpenWhisk's action contract (POST /init, POST
// /run on port 8080) or Knative's plain HTTP on $PORT. It runs as the
// container's workload under swift-init, never as PID 1:
//
//	swift-init -- /.swift/bin/swift-gateway --mode openwhisk --peer b
//	swift-gateway --mode http --listen :$PORT --peer b -- roundtrip
//
// The arguments after -- are the handler (a built-in's name or a shared
// object's path) and its arguments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/log"

	"github.com/swift-rdma/swift-containerd/gateway"
	"github.com/swift-rdma/swift-containerd/swiftrun"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "swift-gateway:", err)
		os.Exit(2)
	}
}

// config turns the command line into the gateway's configuration and its
// listen address.
func config(args []string) (gateway.Config, string, error) {
	fs := flag.NewFlagSet("swift-gateway", flag.ContinueOnError)
	mode := fs.String("mode", string(gateway.ModeOpenWhisk), "openwhisk (POST /init, POST /run) or http (Knative: any request)")
	listen := fs.String("listen", "", "address to listen on (default :8080 for openwhisk; :$PORT, else :8080, for http)")
	socket := fs.String("socket", swiftrun.DefaultSocket, "the zygote's control socket")
	peer := fs.String("peer", "", "the peer whose QPs each function gets (default: the zygote's first)")
	peers := fs.String("peers", "", "comma-separated peers a request's Swift-Peer header may name instead (http mode)")
	maxConns := fs.Int("max-conns", 1024, "client connections open at once")
	qps := fs.Int("qps", 0, "QPs per function (0: one)")
	noQP := fs.Bool("no-qp", false, "functions get no QP")
	conc := fs.Int("concurrency", 1, "functions at once")
	queue := fs.Int("queue", 0, "requests that may wait for a function slot; beyond them 429")
	maxBody := fs.Int64("max-body", gateway.DefaultMaxBody, "most bytes of a request's body (413 beyond)")
	maxResult := fs.Int64("max-result", gateway.DefaultMaxResult, "most bytes of a function's stdout (502 beyond, the function ended)")
	maxLog := fs.Int64("max-log", gateway.DefaultMaxLog, "most bytes of a function's stderr that reach the log")
	timeout := fs.Duration("timeout", gateway.DefaultTimeout, "bound of an activation (an OpenWhisk deadline may be sooner)")
	headerTimeout := fs.Duration("header-timeout", gateway.DefaultHeaderTimeout, "time a client has to send a request's header")
	nodeAddr := fs.Bool("node-address", false, "on the node's network (SWIFT_NETWORK=node), listen on an address other than loopback all the same")
	warm := fs.Bool("warm", false, "the baseline: one long-lived function serves every request, a line of input each (no fork per request, no isolation between requests)")
	bodyTimeout := fs.Duration("body-timeout", gateway.DefaultBodyTimeout, "time a client has to send a request's body after its header")
	if err := fs.Parse(args); err != nil {
		return gateway.Config{}, "", err
	}
	cfg := gateway.Config{
		Mode: gateway.Mode(*mode), Zygote: &swiftrun.Client{Socket: *socket}, Handler: fs.Args(),
		Peer: *peer, QPs: *qps, NoQP: *noQP, Concurrency: *conc, Queue: *queue, MaxConns: *maxConns,
		MaxBody: *maxBody, MaxResult: *maxResult, MaxLog: *maxLog,
		Timeout: *timeout, HeaderTimeout: *headerTimeout, BodyTimeout: *bodyTimeout, Warm: *warm,
	}
	if *peers != "" {
		cfg.Peers = strings.Split(*peers, ",")
	}
	addr := *listen
	if addr == "" {
		addr = ":8080"
		if p := os.Getenv("PORT"); cfg.Mode == gateway.ModeHTTP && p != "" {
			addr = ":" + p
		}
	}
	if err := gateway.CheckListen(addr, os.Getenv("SWIFT_NETWORK"), *nodeAddr); err != nil {
		return gateway.Config{}, "", err
	}
	return cfg, addr, nil
}

func run(args []string) error {
	cfg, addr, err := config(args)
	if err != nil {
		return err
	}
	g, err := gateway.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ln, err := g.Listen(addr)
	if err != nil {
		return err
	}
	srv := g.Server(addr)
	log.G(ctx).WithField("addr", ln.Addr().String()).WithField("mode", cfg.Mode).Info("swift-gateway: serving")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// running functions finish within their bound
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout+5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
