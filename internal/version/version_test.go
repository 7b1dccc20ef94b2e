package version

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	deps := []*debug.Module{
		{Path: "github.com/containerd/errdefs", Version: "v1.0.0"},
		{Path: ContainerdModule, Version: "v2.2.9"},
	}
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name, stamped string
		bi            *debug.BuildInfo
		want          Info
	}{
		{"stamped", "v1.2.3-4-gabcdef0", &debug.BuildInfo{GoVersion: "go1.99", Deps: deps, Settings: vcs},
			Info{"p", "v1.2.3-4-gabcdef0", "v2.2.9", "go1.99"}},
		{"vcs, dirty", "", &debug.BuildInfo{GoVersion: "go1.99", Deps: deps, Settings: vcs},
			Info{"p", "0123abcd-dirty", "v2.2.9", "go1.99"}},
		{"vcs, clean", "", &debug.BuildInfo{GoVersion: "go1.99", Deps: deps, Settings: vcs[:1]},
			Info{"p", "0123abcd", "v2.2.9", "go1.99"}},
		{"no vcs", "", &debug.BuildInfo{GoVersion: "go1.99", Deps: deps},
			Info{"p", "dev", "v2.2.9", "go1.99"}},
		{"replaced containerd", "", &debug.BuildInfo{GoVersion: "go1.99", Deps: []*debug.Module{
			{Path: ContainerdModule, Version: "v2.2.9", Replace: &debug.Module{Path: "../containerd", Version: "v2.4.2"}}}},
			Info{"p", "dev", "v2.4.2", "go1.99"}},
		{"no containerd", "", &debug.BuildInfo{GoVersion: "go1.99"},
			Info{"p", "dev", "unknown", "go1.99"}},
	} {
		if got := fromBuildInfo("p", tc.stamped, tc.bi); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := fromBuildInfo("p", "", nil); got.Version != "dev" || got.Containerd != "unknown" {
		t.Errorf("without build info: %+v", got)
	}
}

func TestWrite(t *testing.T) {
	i := Info{Program: "swiftctl", Version: "v1.0.0", Containerd: "v2.2.9", Go: "go1.99"}
	var b bytes.Buffer
	if err := i.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "swiftctl:\n  Version:    v1.0.0\n  containerd: v2.2.9\n  Go version: go1.99\n"
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := i.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["program"] != "swiftctl" || got["version"] != "v1.0.0" || got["containerd"] != "v2.2.9" || got["go"] != "go1.99" || len(got) != 4 {
		t.Errorf("json: %v", got)
	}
}
