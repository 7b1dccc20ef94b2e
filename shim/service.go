package shim

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	taskv2 "github.com/containerd/containerd/api/runtime/task/v2"
	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/task"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/containerd/v2/pkg/shutdown"
	"github.com/containerd/containerd/v2/plugins"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/log"
	"github.com/containerd/plugin"
	"github.com/containerd/plugin/registry"
	"github.com/containerd/ttrpc"

	"github.com/swift-rdma/swift-containerd/config"
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
	bundles bundles
	leases  leases
}

// RegisterTTRPC implements containerd's shim TTRPCService.
func (s *Service) RegisterTTRPC(server *ttrpc.Server) error {
	taskapi.RegisterTTRPCTaskService(server, s)
	taskv2.RegisterTaskService(server, taskV2{s})
	return nil
}

// Create prepares the bundle's spec, converts runtime options, then delegates.
func (s *Service) Create(ctx context.Context, r *taskapi.CreateTaskRequest) (*taskapi.CreateTaskResponse, error) {
	start := time.Now()
	lease, key, err := prepare(ctx, r)
	if err != nil {
		log.G(ctx).WithError(err).WithField("id", r.ID).Error("swift: create refused")
		return nil, errgrpc.ToGRPC(err)
	}
	log.G(ctx).WithField("id", r.ID).WithField("took", time.Since(start)).Debug("swift: spec prepared")
	resp, err := s.TTRPCTaskService.Create(ctx, r)
	if err != nil {
		lease.release(ctx) // runc did not create it: the lease goes back
		if key != nil {
			key.drop()
		}
		return resp, err
	}
	if key != nil {
		// the container's init: runc's until Start, then swift-init
		key.start(ctx, r.ID, int(resp.Pid))
	}
	s.bundles.set(r.ID, r.Bundle)
	s.leases.set(r.ID, lease)
	return resp, nil
}

// Delete delegates; deleting the init process releases the container's lease.
func (s *Service) Delete(ctx context.Context, r *taskapi.DeleteRequest) (*taskapi.DeleteResponse, error) {
	resp, err := s.TTRPCTaskService.Delete(ctx, r)
	if err == nil && r.ExecID == "" {
		s.bundles.del(r.ID)
		s.leases.take(r.ID).release(ctx)
	}
	return resp, err
}

// prepare is Prepare returning the container's lease (nil without a
// policy) and a zygote's key to hand over (nil for other containers).
func prepare(ctx context.Context, r *taskapi.CreateTaskRequest) (*leaseRef, *keyHandoff, error) {
	ropts, err := ConvertOptions(r)
	if err != nil {
		return nil, nil, err
	}
	cfgPath := ropts.SwiftConfig
	if cfgPath == "" {
		cfgPath = config.PathFromEnv()
	}
	if !filepath.IsAbs(r.Bundle) {
		return nil, nil, fmt.Errorf("bundle path %q is not absolute: %w", r.Bundle, errdefs.ErrInvalidArgument)
	}
	return editBundle(ctx, r.Bundle, cfgPath, Node{CgroupRoot: "/sys/fs/cgroup"})
}
