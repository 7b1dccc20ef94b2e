package shim

import (
	"context"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
)

// EditBundle is editBundle for the tests: under a tenant policy the
// container's lease stays in the ledger.
func EditBundle(ctx context.Context, bundle, cfgPath string, node Node) error {
	node.ConfigPath = cfgPath
	_, err := editBundle(ctx, bundle, node)
	return err
}

// Prepare converts the request's runtime options and edits <bundle>/config.json
// (prepare). A lease it takes stays in the ledger (see EditBundle).
func Prepare(ctx context.Context, r *taskapi.CreateTaskRequest) error {
	_, err := prepare(ctx, r)
	return err
}
