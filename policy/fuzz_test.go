package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// FuzzParse: Parse never panics; it either returns a policy whose tenants
// resolve and admit without panicking, or an InvalidArgument *Error with
// at least one problem.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"testdata/bad", "testdata/good"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.toml"))
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join("..", "examples", "policy.toml")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(resolvePolicy))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.toml", data)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || len(pe.Problems) == 0 || !errdefs.IsInvalidArgument(err) {
				t.Fatalf("error %v (%T) is not an InvalidArgument *Error with problems", err, err)
			}
			if !strings.HasPrefix(err.Error(), "tenant policy fuzz.toml: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if len(p.Tenants) == 0 {
			t.Fatal("a policy without tenants was accepted")
		}
		if p.LocalTenant != "" && p.Tenants[p.LocalTenant] == nil {
			t.Fatalf("local_tenant %q is not a tenant", p.LocalTenant)
		}
		for name, tn := range p.Tenants {
			if tn.Name != name || (tn.Seccomp != SeccompNone && tn.Seccomp != SeccompBaseline) {
				t.Fatalf("tenant %q: %+v", name, tn)
			}
			for _, ns := range append(append([]string{}, tn.Namespaces...), "x", "") {
				for _, claim := range []string{"", name, "zz"} {
					_, _ = p.Resolve(Caller{CRI: true, Namespace: ns}, claim)
					_, _ = p.Resolve(Caller{}, claim)
				}
			}
			_, _ = tn.Admit(ann(t, "swift.io/zygote", "true", "swift.io/pool", "3", "swift.io/peers", "b=10.0.0.1:18515,c=db:1"), []string{"rxe0"})
		}
	})
}
