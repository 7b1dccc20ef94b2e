package install

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/containerd/errdefs"
	"github.com/pelletier/go-toml/v2"

	"github.com/swift-rdma/swift-containerd/config/tomlfile"
)

// RuntimeType is the runtime type containerd resolves to containerd-shim-swift-v2.
const RuntimeType = "io.containerd.swift.v2"

// AnnotationGlob is what CRI must pass through to the runtime.
const AnnotationGlob = "swift.io/*"

// Plugin IDs of the CRI runtime configuration by config version.
const (
	PluginV2 = "io.containerd.grpc.v1.cri"    // version 2 (containerd 1.7)
	PluginV3 = "io.containerd.cri.v1.runtime" // versions 3 and 4 (containerd 2.x)
)

// PluginFor returns the plugin ID under which config version v declares runtimes.
func PluginFor(v int) (string, error) {
	switch v {
	case 2:
		return PluginV2, nil
	case 3, 4:
		return PluginV3, nil
	case 0, 1:
		return "", fmt.Errorf("containerd config version 1 (a config without `version` is version 1) is not supported: "+
			"migrate it with `containerd config migrate` (containerd 2.x) or set `version = 2` (containerd 1.7): %w", errdefs.ErrFailedPrecondition)
	}
	return "", fmt.Errorf("containerd config version %d is not supported (known: 2, 3, 4): %w", v, errdefs.ErrFailedPrecondition)
}

// Params fill the drop-in template.
type Params struct {
	// Version is the containerd config version: 2, 3 or 4.
	Version int
	// Name is the runtime entry's name (the RuntimeClass handler).
	Name string
	// BinaryName and SystemdCgroup are runc options of the entry.
	BinaryName    string
	SystemdCgroup bool
	// RuncOptions are the entry's further runc options (Root, ShimCgroup,
	// IoUid, ...: strings, booleans and integers), copied from RuncFrom,
	// the file of the node's runc entry ("": none copied).
	RuncOptions map[string]any
	RuncFrom    string
	// SwiftConfig is the node config path for this entry.
	SwiftConfig string
	// CNIConfDir is the entry's cni_conf_dir ("": the node's CNI network).
	CNIConfDir string
	// Shim is the entry's runtime_path ("": containerd-shim-swift-v2 from
	// containerd's PATH).
	Shim string
	// Root is the root config's path, Dir the drop-in directory and Glob
	// the import entry that names it: they appear in the header comment.
	Root, Dir, Glob string
	// CRISection, for version 2 only, is a copy of the root config's
	// [plugins."io.containerd.grpc.v1.cri"] table (nil: none).
	CRISection map[string]any
}

var dropIn = template.Must(template.New("drop-in").Funcs(template.FuncMap{"quote": tomlfile.Quote}).Parse(
	`{{if eq .Version 2 -}}
# containerd 1.7 (config version 2): drop into the directory named by
# ` + "`imports`" + ` in {{.Root}} (which must say ` + "`version = 2`" + `).
# containerd 1.7 replaces the whole CRI plugin section with an imported
# file's, runc runtime included: prefer ` + "`swiftctl install containerd`" + `,
# which copies the root's CRI section into the drop-in it writes.
{{- else -}}
# containerd 2.x (config version {{.Version}}): drop into {{.Dir}}/ and
# make sure {{.Root}} has ` + "`version = {{.Version}}`" + ` and
# ` + "`imports = [{{quote .Glob}}]`" + `.
{{- end}}
version = {{.Version}}
{{with .Copied}}
# containerd 1.7 takes a plugin's whole section from the last file that sets
# it (containerd#5837): these are {{$.Root}}'s
# [plugins."{{$.Plugin}}"] settings, copied by swiftctl install containerd.
# Run it again after changing them there.
{{.}}{{end}}
[plugins."{{.Plugin}}".containerd.runtimes.{{.Name}}]
  runtime_type = {{quote .RuntimeType}}
{{- with .Shim}}
  runtime_path = {{quote .}}
{{- end}}
{{- if ne .Version 2}}
  # CRI passes only annotations listed here to the runtime.
{{- end}}
  pod_annotations = [{{quote .Annotations}}]
  container_annotations = [{{quote .Annotations}}]
{{- with .CNIConfDir}}
  # pods of this runtime class are on the CNI network configured here
  cni_conf_dir = {{quote .}}
{{- end}}

[plugins."{{.Plugin}}".containerd.runtimes.{{.Name}}.options]
{{- if ne .Version 2}}
  # runc's options are honoured (the shim converts them for runc) ...
{{- end}}
{{- with .RuncFrom}}
  # runc's options, copied from the runc runtime entry of
  # {{.}}: run swiftctl install containerd again after changing them there.
{{- end}}
  BinaryName = {{quote .BinaryName}}
  SystemdCgroup = {{.SystemdCgroup}}
{{- range .Rest}}
  {{.}}
{{- end}}
{{- if ne .Version 2}}
  # ... plus the node config path for this runtime entry.
{{- end}}
  SwiftConfig = {{quote .SwiftConfig}}
`))

// Render returns the drop-in file for p.
func Render(p Params) ([]byte, error) {
	plugin, err := PluginFor(p.Version)
	if err != nil {
		return nil, err
	}
	if err := ValidateRuntimeName(p.Name); err != nil {
		return nil, err
	}
	copied := ""
	if p.CRISection != nil {
		if p.Version != 2 {
			return nil, fmt.Errorf("a copy of the CRI section is only for config version 2: %w", errdefs.ErrInvalidArgument)
		}
		var b bytes.Buffer
		enc := toml.NewEncoder(&b)
		enc.SetIndentTables(true)
		if err := enc.Encode(map[string]any{"plugins": map[string]any{PluginV2: p.CRISection}}); err != nil {
			return nil, fmt.Errorf("encode the copy of [plugins.%q]: %w", PluginV2, err)
		}
		copied = strings.TrimRight(b.String(), "\n") + "\n"
	}
	var rest []string
	keys := make([]string, 0, len(p.RuncOptions))
	for k := range p.RuncOptions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := tomlValue(p.RuncOptions[k])
		if err != nil {
			return nil, fmt.Errorf("runc option %s: %w", k, err)
		}
		rest = append(rest, k+" = "+v)
	}
	var out bytes.Buffer
	err = dropIn.Execute(&out, struct {
		Params
		Plugin, RuntimeType, Annotations, Copied string
		Rest                                     []string
	}{p, plugin, RuntimeType, AnnotationGlob, copied, rest})
	if err != nil {
		return nil, fmt.Errorf("render drop-in: %w", err)
	}
	return out.Bytes(), nil
}

// tomlValue renders a runc option's value.
func tomlValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return tomlfile.Quote(x), nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int:
		return strconv.Itoa(x), nil
	case uint32:
		return strconv.FormatUint(uint64(x), 10), nil
	}
	return "", fmt.Errorf("%v (%T) is not a string, a boolean or an integer: %w", v, v, errdefs.ErrInvalidArgument)
}

// ValidateRuntimeName accepts a DNS label (what a Kubernetes RuntimeClass
// handler must be), which is also a bare TOML key and a file name.
func ValidateRuntimeName(name string) error {
	ok := len(name) > 0 && len(name) <= 63
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		ok = alnum || c == '-' && i > 0 && i < len(name)-1
	}
	if !ok {
		return fmt.Errorf("runtime name %q: want a DNS label (lowercase letters, digits, '-'; at most 63): %w", name, errdefs.ErrInvalidArgument)
	}
	return nil
}
