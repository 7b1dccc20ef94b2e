// Command swiftctl is the operator CLI of the Swift runtime: node checks,
// config and tenant policy validation, the lease ledger (pools),
// and containerd installation.
package main

import (
	"context"
	"fmt"
	"github.com/swift-rdma/swift-containerd/ledger"
	"os"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage: swiftctl COMMAND [flags]

commands:
  config check [FILE]   validate a node config (default: $SWIFT_CONFIG or /etc/swift/config.toml)
  policy check [FILE]   validate a tenant policy, errors with line numbers (default: the node config's policy_path)
  pools ls [--leases] [--json]
                        RDMA leases in the node's ledger: usage and quota per tenant
  pools gc [--dry-run]  reclaim the leases of containers that no longer exist
  pools repair [--dry-run] [--address SOCKET] [--state DIR]
                        rebuild a corrupt ledger from the containers containerd has
  keys gen|rotate|show FILE
                        a tenant keyring for the zygotes of every node (show prints fingerprints only)
  devices               list the node's RDMA devices and their uverbs nodes
  cdi generate [--dir DIR] [--stdout]
                        write the CDI spec of the node's RDMA devices (swift.io/rdma=DEVICE; default dir /etc/cdi)
  cache build|check|show  profile libibverbs and build, check (exit 1 unless valid) or show the node's verbs cache
  install containerd    add the swift runtime to containerd's config (a drop-in; --dry-run shows the diff)
  uninstall containerd  remove what install containerd added
  doctor [--json]       check this node: RDMA, limits, cgroups, node config, containerd, runc
  version               print the version
`)
}

// Version is set by the build.
var Version = "dev"

func main() {
	ledger.RunCheckIfAsked() // a ledger check in a process of its own
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx := context.Background()
	var err error
	switch os.Args[1] {
	case "config":
		err = cmdConfig(os.Args[2:])
	case "devices":
		err = cmdDevices(os.Args[2:])
	case "cdi":
		err = cmdCDI(os.Stdout, os.Args[2:])
	case "policy":
		err = cmdPolicy(os.Args[2:])
	case "pools":
		err = cmdPools(os.Args[2:])
	case "keys":
		err = cmdKeys(os.Stdout, os.Args[2:])
	case "cache":
		err = cmdCache(ctx, os.Stdout, os.Args[2:])
	case "install":
		err = cmdInstall(os.Args[2:])
	case "uninstall":
		err = cmdUninstall(os.Args[2:])
	case "doctor":
		var failed bool
		if failed, err = cmdDoctor(ctx, os.Stdout, os.Args[2:]); err == nil && failed {
			os.Exit(1)
		}
	case "version":
		fmt.Println("swiftctl", Version)
	case "-h", "--help", "help":
		usage()
	default:
		usage()
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "swiftctl:", err)
		os.Exit(1)
	}
}
