package shim

import (
	"context"

	taskv2 "github.com/containerd/containerd/api/runtime/task/v2"
	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// taskV2 serves the task API v2 (containerd.task.v2.Task) over ttrpc by
// forwarding to the v3 service: containerd 1.7 speaks only v2 to a ttrpc
// shim, 2.x both. The v2 and v3 messages are the same on the wire.
type taskV2 struct{ s taskapi.TTRPCTaskService }

var _ taskv2.TaskService = taskV2{}

// via converts the v2 request in to its v3 twin, calls f, and converts the
// v3 response into out.
func via[PR3 interface {
	*R3
	proto.Message
}, R3 any, Resp3 proto.Message](ctx context.Context, in, out proto.Message, f func(context.Context, PR3) (Resp3, error)) error {
	b, err := proto.Marshal(in)
	if err != nil {
		return err
	}
	r3 := PR3(new(R3))
	if err := proto.Unmarshal(b, r3); err != nil {
		return err
	}
	resp, err := f(ctx, r3)
	if err != nil {
		return err
	}
	if b, err = proto.Marshal(resp); err != nil {
		return err
	}
	return proto.Unmarshal(b, out)
}

// State implements taskv2.TaskService.
func (t taskV2) State(ctx context.Context, r *taskv2.StateRequest) (*taskv2.StateResponse, error) {
	out := &taskv2.StateResponse{}
	return out, via(ctx, r, out, t.s.State)
}

// Create implements taskv2.TaskService.
func (t taskV2) Create(ctx context.Context, r *taskv2.CreateTaskRequest) (*taskv2.CreateTaskResponse, error) {
	out := &taskv2.CreateTaskResponse{}
	return out, via(ctx, r, out, t.s.Create)
}

// Start implements taskv2.TaskService.
func (t taskV2) Start(ctx context.Context, r *taskv2.StartRequest) (*taskv2.StartResponse, error) {
	out := &taskv2.StartResponse{}
	return out, via(ctx, r, out, t.s.Start)
}

// Delete implements taskv2.TaskService.
func (t taskV2) Delete(ctx context.Context, r *taskv2.DeleteRequest) (*taskv2.DeleteResponse, error) {
	out := &taskv2.DeleteResponse{}
	return out, via(ctx, r, out, t.s.Delete)
}

// Pids implements taskv2.TaskService.
func (t taskV2) Pids(ctx context.Context, r *taskv2.PidsRequest) (*taskv2.PidsResponse, error) {
	out := &taskv2.PidsResponse{}
	return out, via(ctx, r, out, t.s.Pids)
}

// Pause implements taskv2.TaskService.
func (t taskV2) Pause(ctx context.Context, r *taskv2.PauseRequest) (*emptypb.Empty, error) {
	out := &emptypb.Empty{}
	return out, via(ctx, r, out, t.s.Pause)
}

// Resume implements taskv2.TaskService.
func (t taskV2) Resume(ctx context.Context, r *taskv2.ResumeRequest) (*emptypb.Empty, error) {
	out := &emptypb.Empty{}
	return out, via(ctx, r, out, t.s.Resume)
}

// Checkpoint implements taskv2.TaskService.
func (t taskV2) Checkpoint(ctx context.Context, r *taskv2.CheckpointTaskRequest) (*emptypb.Empty, error) {
	out := &emptypb.Empty{}
	return out, via(ctx, r, out, t.s.Checkpoint)
}

// Kill implements taskv2.TaskService.
func (t taskV2) Kill(ctx context.Context, r *taskv2.KillRequest) (*emptypb.Empty, error) {
	out := &emptypb.Empty{}
	return out, via(ctx, r, out, t.s.Kill)
}

// Exec implements taskv2.TaskService.
func (t taskV2) Exec(ctx context.Context, r *taskv2.ExecProcessRequest) (*emptypb.Empty, error) {
	out := &emptypb.Empty{}
	return out, via(ctx, r, out, t.s.Exec)
}

// ResizePty implements taskv2.TaskService.
func (t taskV2) ResizePty(ctx context.Context, r *taskv2.ResizePtyRequest) (*emptypb.Empty, error) {
	out := &emptypb.Empty{}
	return out, via(ctx, r, out, t.s.ResizePty)
}

// CloseIO implements taskv2.TaskService.
func (t taskV2) CloseIO(ctx context.Context, r *taskv2.CloseIORequest) (*emptypb.Empty, error) {
	out := &emptypb.Empty{}
	return out, via(ctx, r, out, t.s.CloseIO)
}

// Update implements taskv2.TaskService.
func (t taskV2) Update(ctx context.Context, r *taskv2.UpdateTaskRequest) (*emptypb.Empty, error) {
	out := &emptypb.Empty{}
	return out, via(ctx, r, out, t.s.Update)
}

// Wait implements taskv2.TaskService.
func (t taskV2) Wait(ctx context.Context, r *taskv2.WaitRequest) (*taskv2.WaitResponse, error) {
	out := &taskv2.WaitResponse{}
	return out, via(ctx, r, out, t.s.Wait)
}

// Stats implements taskv2.TaskService.
func (t taskV2) Stats(ctx context.Context, r *taskv2.StatsRequest) (*taskv2.StatsResponse, error) {
	out := &taskv2.StatsResponse{}
	return out, via(ctx, r, out, t.s.Stats)
}

// Connect implements taskv2.TaskService.
func (t taskV2) Connect(ctx context.Context, r *taskv2.ConnectRequest) (*taskv2.ConnectResponse, error) {
	out := &taskv2.ConnectResponse{}
	return out, via(ctx, r, out, t.s.Connect)
}

// Shutdown implements taskv2.TaskService.
func (t taskV2) Shutdown(ctx context.Context, r *taskv2.ShutdownRequest) (*emptypb.Empty, error) {
	out := &emptypb.Empty{}
	return out, via(ctx, r, out, t.s.Shutdown)
}
