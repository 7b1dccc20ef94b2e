// Command swift-hook runs as the OCI hooks the Swift shim adds to an
// opted-in container (package hooks): `netcheck` as a createRuntime hook,
// `release` as a poststop hook. It reads the container state on stdin and
// exits non-zero with the reason on stderr, which runc reports as the
// container's create error.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/hooks"
	"github.com/swift-rdma/swift-containerd/ledger"
)

func main() {
	ledger.RunCheckIfAsked() // release opens the ledger
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "swift-hook:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("usage: swift-hook netcheck --devices DEV[,DEV] [--sys-root DIR] | swift-hook release [--config FILE] (container state on stdin)")
	}
	fs := flag.NewFlagSet("swift-hook "+args[0], flag.ContinueOnError)
	switch args[0] {
	case "netcheck":
		devices := fs.String("devices", "", "the container's RDMA devices")
		sysRoot := fs.String("sys-root", "/", "where sysfs is mounted (as the node config's rdma.sys_root)")
		move := fs.Bool("move", false, "in RDMA netns exclusive mode, move the devices into the container's network namespace (they were allocated to it)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *devices == "" {
			return fmt.Errorf("netcheck: --devices names no device")
		}
		st, err := hooks.ReadState(os.Stdin)
		if err != nil {
			return err
		}
		return hooks.NetCheck(st, *sysRoot, strings.Split(*devices, ","), *move)
	case "release":
		cfgPath := fs.String("config", config.PathFromEnv(), "node config (its state_dir holds the ledger)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		st, err := hooks.ReadState(os.Stdin)
		if err == nil {
			err = hooks.Release(*cfgPath, st)
		}
		if err != nil {
			// a backstop: a failure must not fail the container's delete
			// (runc reports poststop errors); gc reclaims what is left
			fmt.Fprintf(os.Stderr, "swift-hook: release (left to swiftctl pools gc): %v\n", err)
		}
		return nil
	default:
		return fmt.Errorf("unknown hook %q (netcheck or release)", args[0])
	}
}
