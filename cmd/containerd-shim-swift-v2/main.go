// Command containerd-shim-swift-v2 is the Swift containerd runtime shim
// (runtime type io.containerd.swift.v2): runc's shim with RDMA injection.
package main

import (
	"context"

	"github.com/containerd/containerd/v2/pkg/shim"

	"github.com/swift-rdma/swift-containerd/ledger"
	swiftshim "github.com/swift-rdma/swift-containerd/shim"
)

func main() {
	ledger.RunCheckIfAsked() // a ledger check in a process of its own
	shim.Run(context.Background(), swiftshim.NewManager())
}
