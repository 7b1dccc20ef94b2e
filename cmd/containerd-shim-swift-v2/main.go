// Command containerd-shim-swift-v2 is the Swift containerd runtime shim
// (runtime type io.containerd.swift.v2): runc's shim with RDMA injection.
//
// --version (or -v) prints the shim's own version, stamped at build time,
// and the containerd library it links; every other argument is containerd's
// shim protocol (containerd's shim.Run).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/containerd/v2/pkg/shim"

	"github.com/swift-rdma/swift-containerd/internal/version"
	"github.com/swift-rdma/swift-containerd/ledger"
	swiftshim "github.com/swift-rdma/swift-containerd/shim"
)

func main() {
	ledger.RunCheckIfAsked() // a ledger check in a process of its own
	if wantsVersion(os.Args[1:]) {
		if err := printVersion(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	shim.Run(context.Background(), swiftshim.NewManager())
}

// shimValueFlags are containerd's shim flags that take a value (the next
// argument unless written -flag=value).
var shimValueFlags = map[string]bool{
	"namespace": true, "id": true, "socket": true, "debug-socket": true,
	"bundle": true, "address": true, "publish-binary": true,
}

// wantsVersion tells whether args ask for the version, read as containerd's
// shim reads its flags (Go's flag package): they stop at the first non-flag
// argument (the action) or at "--". shim.Run would answer -v with
// containerd's own version constant, and --version with a usage error.
func wantsVersion(args []string) bool {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			return false
		}
		name := strings.TrimLeft(a, "-")
		if name == "version" || name == "v" {
			return true
		}
		if shimValueFlags[name] {
			i++ // its value
		}
	}
	return false
}

func printVersion(w io.Writer) error {
	return version.Get(filepath.Base(os.Args[0])).WriteText(w)
}
