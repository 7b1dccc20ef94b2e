package nodeconf

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Ref
		err  error
	}{
		{"", Ref{}, nil},
		{"swift-system/swift-policy", Ref{"swift-system", "swift-policy"}, nil},
		{"swift-policy", Ref{}, errdefs.ErrInvalidArgument},
		{"Swift/x", Ref{}, errdefs.ErrInvalidArgument},
		{"swift-system/", Ref{}, errdefs.ErrInvalidArgument},
		{"swift-system/a/b", Ref{}, errdefs.ErrInvalidArgument},
	} {
		got, err := ParseRef(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ParseRef(%q) = %v, %v; want %v, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// TestWatch: the ConfigMap's policy and the Secret's rings reach the node
// as they change, a bad policy changes nothing, and the Secret's deletion
// removes its rings.
func TestWatch(t *testing.T) {
	// the fake clientset sends no watch-list bookmark: list, then watch
	t.Setenv("KUBE_FEATURE_WatchListClient", "false")
	dir := t.TempDir()
	in := &Installer{PolicyPath: filepath.Join(dir, "policy.toml"), KeysDir: filepath.Join(dir, "keys")}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "swift-system", Name: "swift-policy"},
		Data: map[string]string{PolicyKey: goodPolicy}}
	a := ring(t, "a")
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "swift-system", Name: "swift-tenant-keys"},
		Data: map[string][]byte{"team-a.keys": a}}
	// decoys of other names (the fake client ignores field selectors: the
	// handlers must too)
	decoyCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "swift-system", Name: "other"},
		Data: map[string]string{PolicyKey: "[tenants.evil]\nnamespaces = [\"*\"]\n"}}
	decoySec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "swift-system", Name: "other"},
		Data: map[string][]byte{"evil.keys": ring(t, "e")}}
	client := fake.NewClientset(cm, sec)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	Watch(ctx, client, in, Ref{"swift-system", "swift-policy"}, Ref{"swift-system", "swift-tenant-keys"}, time.Hour)
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for i := 0; i < 100; i++ {
			if ok() {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: not within 5 s", what)
	}
	file := func(p string) string { b, _ := os.ReadFile(p); return string(b) }
	eventually("the first policy", func() bool { return file(in.PolicyPath) == goodPolicy })
	eventually("the first ring", func() bool { return file(filepath.Join(in.KeysDir, "team-a.keys")) == string(a) })
	if _, err := client.CoreV1().ConfigMaps("swift-system").Create(ctx, decoyCM, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Secrets("swift-system").Create(ctx, decoySec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if got := file(in.PolicyPath); got != goodPolicy {
		t.Fatalf("after a decoy ConfigMap the policy is %q", got)
	}
	if _, err := os.Stat(filepath.Join(in.KeysDir, "evil.keys")); !os.IsNotExist(err) {
		t.Fatalf("the decoy Secret's ring was installed: %v", err)
	}

	// a policy update reaches the node; a bad one does not
	next := goodPolicy + "[tenants.team-b]\nnamespaces = [\"team-b\"]\n"
	cm.Data[PolicyKey] = next
	if _, err := client.CoreV1().ConfigMaps("swift-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("the updated policy", func() bool { return file(in.PolicyPath) == next })
	cm.Data[PolicyKey] = "[tenants\n"
	if _, err := client.CoreV1().ConfigMaps("swift-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// (Policy's own test shows a malformed policy is never written; here
	// the file must still be the last good one once the Secret's update
	// is through)
	sec.Data = map[string][]byte{"team-a.keys": a, "team-b.keys": ring(t, "b")}
	if _, err := client.CoreV1().Secrets("swift-system").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("the second ring", func() bool { return file(filepath.Join(in.KeysDir, "team-b.keys")) != "" })
	if got := file(in.PolicyPath); got != next {
		t.Errorf("after a malformed policy the file is %q, want the last good one", got)
	}
	// team-b leaves the Secret: its ring goes
	sec.Data = map[string][]byte{"team-a.keys": a}
	if _, err := client.CoreV1().Secrets("swift-system").Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually("team-b's ring removed", func() bool { return file(filepath.Join(in.KeysDir, "team-b.keys")) == "" })
	// the Secret and the ConfigMap go (a namespace deleted): the node keeps
	// its rings and its policy
	if err := client.CoreV1().Secrets("swift-system").Delete(ctx, sec.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().ConfigMaps("swift-system").Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if got := file(filepath.Join(in.KeysDir, "team-a.keys")); got != string(a) {
		t.Errorf("after the Secret's deletion team-a.keys is %q, want it kept", got)
	}
	if got := file(in.PolicyPath); got != next {
		t.Errorf("after the ConfigMap's deletion the policy is %q, want it kept", got)
	}
}
