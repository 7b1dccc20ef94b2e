// Command containerd-shim-swift-v2 is the Swift containerd runtime shim
// (runtime type io.containerd.swift.v2): runc's shim with RDMA injection.
package main

import (
	"context"

	"github.com/containerd/containerd/v2/pkg/shim"

	swiftshim "github.com/swift-rdma/swift-containerd/shim"
)

func main() {
	shim.Run(context.Background(), swiftshim.NewManager())
}
