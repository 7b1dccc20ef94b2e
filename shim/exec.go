package shim

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/swift-rdma/swift-containerd/inject"
	"github.com/swift-rdma/swift-containerd/policy"
)

// Exec gives an exec'd process what Create gave the container: containerd
// builds the exec spec from the spec it stored, which lacks Swift's edits.
func (s *Service) Exec(ctx context.Context, r *taskapi.ExecProcessRequest) (*emptypb.Empty, error) {
	if dir := s.containers.bundle(r.ID); dir != "" && r.Spec != nil {
		if err := EditExecSpec(filepath.Join(dir, SpecFile), r); err != nil {
			return nil, errgrpc.ToGRPC(err)
		}
	}
	return s.TTRPCTaskService.Exec(ctx, r)
}

// EditExecSpec adds to r's process the RLIMIT_MEMLOCK and the environment
// variables of the container's spec at specPath that the process lacks,
// and takes from it the network capabilities (policy.NetCapabilities)
// outside the container's bounding set: a policy that took CAP_NET_RAW
// from the container takes it from every process exec'd in it too.
func EditExecSpec(specPath string, r *taskapi.ExecProcessRequest) error {
	b, err := os.ReadFile(specPath)
	if err != nil {
		return fmt.Errorf("read container spec: %w", err)
	}
	var c specs.Spec
	if err := json.Unmarshal(b, &c); err != nil || c.Process == nil {
		return fmt.Errorf("container spec %s: %v: %w", specPath, err, errdefs.ErrFailedPrecondition)
	}
	var p specs.Process
	if err := json.Unmarshal(r.Spec.Value, &p); err != nil {
		return fmt.Errorf("exec process spec: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	changed := false
	for _, rl := range c.Process.Rlimits {
		if rl.Type != "RLIMIT_MEMLOCK" {
			continue
		}
		has := false
		for _, e := range p.Rlimits {
			has = has || e.Type == rl.Type
		}
		if !has {
			p.Rlimits = append(p.Rlimits, rl)
			changed = true
		}
	}
	keys := map[string]bool{}
	for _, e := range p.Env {
		k, _, _ := strings.Cut(e, "=")
		keys[k] = true
	}
	for _, e := range c.Process.Env {
		if k, _, _ := strings.Cut(e, "="); !keys[k] {
			p.Env = append(p.Env, e)
			changed = true
		}
	}
	if p.Capabilities != nil {
		var bounding []string
		if c.Process.Capabilities != nil {
			bounding = c.Process.Capabilities.Bounding
		}
		var drop []string
		for _, name := range policy.NetCapabilities {
			if !inject.HasCapability(bounding, name) {
				drop = append(drop, name)
			}
		}
		if inject.DropFrom(p.Capabilities, drop) {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	out, err := json.Marshal(&p)
	if err != nil {
		return err
	}
	r.Spec.Value = out
	return nil
}
