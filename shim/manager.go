package shim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"

	"github.com/containerd/containerd/api/types"
	"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2/manager"
	"github.com/containerd/containerd/v2/pkg/shim"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Manager is runc's shim manager, with the runtime options containerd
// passes to Start and Info (on stdin) converted from CRI's
// runtimeoptions.v1.Options to runc options first.
type Manager struct{ shim.Manager }

// NewManager returns the Swift shim manager.
func NewManager() Manager { return Manager{manager.NewShimManager(RuntimeType)} }

// Info reports runc's runtime info and features for the converted options.
func (m Manager) Info(ctx context.Context, optionsR io.Reader) (*types.RuntimeInfo, error) {
	b, err := io.ReadAll(optionsR)
	if err != nil {
		return nil, err
	}
	if b, err = runcOptionsBytes(b); err != nil {
		return nil, err
	}
	return m.Manager.Info(ctx, bytes.NewReader(b))
}

// Start starts the shim; runc's manager reads the options (ShimCgroup) from stdin.
func (m Manager) Start(ctx context.Context, id string, opts shim.StartOpts) (shim.BootstrapParams, error) {
	b, err := io.ReadAll(os.Stdin)
	if err != nil {
		return shim.BootstrapParams{}, err
	}
	if b, err = runcOptionsBytes(b); err != nil {
		return shim.BootstrapParams{}, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return shim.BootstrapParams{}, err
	}
	go func() { _, _ = w.Write(b); w.Close() }()
	stdin := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = stdin; r.Close() }()
	params, err := m.Manager.Start(ctx, id, opts)
	// Task API v2 over ttrpc: what containerd 1.7 accepts (it refuses 3);
	// 2.x accepts it too.
	params.Version = 2
	return params, err
}

// runcOptionsBytes converts a serialized Any holding runtimeoptions into
// one holding runc options (convertOptions); anything else, and options
// of a type the shim does not know (Create refuses those), is returned
// unchanged.
func runcOptionsBytes(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return b, nil
	}
	var a anypb.Any
	if err := proto.Unmarshal(b, &a); err != nil {
		return b, nil
	}
	_, out, err := convertOptions(&a)
	if errors.Is(err, errUnsupportedOptions) || (err == nil && out == &a) {
		return b, nil
	}
	if err != nil {
		return nil, err
	}
	return proto.Marshal(out)
}
