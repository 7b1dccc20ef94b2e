package shim

import (
	"context"

	taskv2 "github.com/containerd/containerd/api/runtime/task/v2"
	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/task"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/containerd/v2/pkg/shutdown"
	"github.com/containerd/containerd/v2/plugins"
	"github.com/containerd/plugin"
	"github.com/containerd/plugin/registry"
	"github.com/containerd/ttrpc"
)

// RuntimeType is the containerd runtime type this shim serves.
const RuntimeType = "io.containerd.swift.v2"

func init() {
	registry.Register(&plugin.Registration{
		Type: plugins.TTRPCPlugin,
		ID:   "task",
		Requires: []plugin.Type{
			plugins.EventPlugin,
			plugins.InternalPlugin,
		},
		InitFn: func(ic *plugin.InitContext) (interface{}, error) {
			pp, err := ic.GetByID(plugins.EventPlugin, "publisher")
			if err != nil {
				return nil, err
			}
			ss, err := ic.GetByID(plugins.InternalPlugin, "shutdown")
			if err != nil {
				return nil, err
			}
			runc, err := task.NewTaskService(ic.Context, pp.(shim.Publisher), ss.(shutdown.Service))
			if err != nil {
				return nil, err
			}
			return &Service{TTRPCTaskService: runc}, nil
		},
	})
}

// Service is the Swift task service. Calls it does not override go to the
// embedded runc task service unchanged.
type Service struct {
	taskapi.TTRPCTaskService
	containers containers
}

// RegisterTTRPC implements containerd's shim TTRPCService.
func (s *Service) RegisterTTRPC(server *ttrpc.Server) error {
	taskapi.RegisterTTRPCTaskService(server, s)
	taskv2.RegisterTaskService(server, taskV2{s})
	return nil
}

// Delete delegates; deleting the init process releases the container's lease.
func (s *Service) Delete(ctx context.Context, r *taskapi.DeleteRequest) (*taskapi.DeleteResponse, error) {
	resp, err := s.TTRPCTaskService.Delete(ctx, r)
	if err == nil && r.ExecID == "" {
		s.containers.remove(r.ID).lease.release(ctx)
	}
	return resp, err
}
