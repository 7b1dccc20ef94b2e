package shim

import (
	"context"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
)

// EditBundle applies the Swift injection to bundle/config.json. Containers
// that do not opt in, and the CRI sandbox container, are left as they are.
// On error the file is unchanged and no lease is held. On success, under a
// tenant policy, the container's lease stays in the ledger (the task
// service releases it on Delete; `swiftctl pools gc` once the container is
// gone).
func EditBundle(ctx context.Context, bundle, cfgPath string, node Node) error {
	_, _, err := editBundle(ctx, bundle, cfgPath, node)
	return err
}

// Prepare converts the request's runtime options and edits <bundle>/config.json.
// A lease it takes stays in the ledger (see EditBundle).
func Prepare(ctx context.Context, r *taskapi.CreateTaskRequest) error {
	_, _, err := prepare(ctx, r)
	return err
}
