package shim

import (
	"errors"
	"fmt"
	"os"
	"strings"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types/runc/options"
	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"github.com/pelletier/go-toml/v2"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/swift-rdma/swift-containerd/internal/tomlstrict"
)

// RuntimeOptions are the keys a containerd runtime entry may set under
// `options` for the swift runtime: runc's keys, plus SwiftConfig.
type RuntimeOptions struct {
	BinaryName    string `toml:"BinaryName"`
	Root          string `toml:"Root"`
	SystemdCgroup bool   `toml:"SystemdCgroup"`
	NoPivotRoot   bool   `toml:"NoPivotRoot"`
	NoNewKeyring  bool   `toml:"NoNewKeyring"`
	ShimCgroup    string `toml:"ShimCgroup"`
	IoUid         uint32 `toml:"IoUid"`
	IoGid         uint32 `toml:"IoGid"`
	CriuImagePath string `toml:"CriuImagePath"`
	CriuWorkPath  string `toml:"CriuWorkPath"`
	// SwiftConfig overrides the node config path for this runtime entry.
	SwiftConfig string `toml:"SwiftConfig"`
}

func (o RuntimeOptions) runc() *options.Options {
	return &options.Options{
		BinaryName: o.BinaryName, Root: o.Root, SystemdCgroup: o.SystemdCgroup,
		NoPivotRoot: o.NoPivotRoot, NoNewKeyring: o.NoNewKeyring, ShimCgroup: o.ShimCgroup,
		IoUid: o.IoUid, IoGid: o.IoGid, CriuImagePath: o.CriuImagePath, CriuWorkPath: o.CriuWorkPath,
	}
}

// ParseRuntimeOptions decodes the TOML body of a runtime's options (named
// name in errors). Unknown keys are an error naming them.
func ParseRuntimeOptions(name string, body []byte) (RuntimeOptions, error) {
	var o RuntimeOptions
	if err := tomlstrict.Decode(body, &o); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) {
			var keys []string
			for _, e := range sm.Errors {
				keys = append(keys, strings.Join(e.Key(), "."))
			}
			return o, fmt.Errorf("runtime options %s: unknown key(s) %s (known: runc's options and SwiftConfig): %w",
				name, strings.Join(keys, ", "), errdefs.ErrInvalidArgument)
		}
		return o, fmt.Errorf("runtime options %s: %v: %w", name, err, errdefs.ErrInvalidArgument)
	}
	return o, nil
}

// ConvertOptions replaces CRI's generic runtimeoptions.Options (TOML in
// ConfigBody, or a file at ConfigPath) in r with the runc options the runc
// task service expects, and returns what was decoded. Runc options and no
// options pass through unchanged.
func ConvertOptions(r *taskapi.CreateTaskRequest) (RuntimeOptions, error) {
	ro, a, err := convertOptions(r.Options)
	if err != nil {
		return ro, err
	}
	r.Options = a
	return ro, nil
}

// errUnsupportedOptions marks options of a type the shim does not know
// (or bytes that are no options at all: the shim's start passes them on).
var errUnsupportedOptions = errors.New("unsupported runtime options")

// convertOptions is the one conversion of runtime options, for Create
// (ConvertOptions) and for the shim's start (runcOptionsBytes): runc
// options and none pass through; runtimeoptions.v1 (TOML in ConfigBody,
// or a file at ConfigPath) are decoded and replaced by the runc options
// they hold; any other type is an InvalidArgument error.
func convertOptions(a *anypb.Any) (RuntimeOptions, *anypb.Any, error) {
	if a.GetValue() == nil && a.GetTypeUrl() == "" {
		return RuntimeOptions{}, a, nil
	}
	v, err := typeurl.UnmarshalAny(a)
	if err != nil {
		return RuntimeOptions{}, a, fmt.Errorf("runtime options of type %q: %v: %w: %w", a.GetTypeUrl(), err, errUnsupportedOptions, errdefs.ErrInvalidArgument)
	}
	var ro RuntimeOptions
	switch o := v.(type) {
	case *options.Options:
		return RuntimeOptions{}, a, nil
	case *runtimeoptions.Options:
		body, name := o.ConfigBody, "ConfigBody"
		if len(body) == 0 && o.ConfigPath != "" {
			if body, err = os.ReadFile(o.ConfigPath); err != nil {
				return ro, a, fmt.Errorf("runtime options ConfigPath: %v: %w", err, errdefs.ErrInvalidArgument)
			}
			name = o.ConfigPath
		}
		if ro, err = ParseRuntimeOptions(name, body); err != nil {
			return ro, a, err
		}
	default:
		return ro, a, fmt.Errorf("runtime options of type %q are not supported (want runc or runtimeoptions.v1 options): %w: %w",
			a.GetTypeUrl(), errUnsupportedOptions, errdefs.ErrInvalidArgument)
	}
	out, err := typeurl.MarshalAnyToProto(ro.runc())
	if err != nil {
		return ro, a, fmt.Errorf("encode runc options: %w", err)
	}
	return ro, out, nil
}
