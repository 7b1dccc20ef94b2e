package nodeinstall

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The label is set and removed alone: the node's other labels, its
// annotations and taints stay.
func TestNodeLabel(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"zone": "z1"}, Annotations: map[string]string{"n": "1"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "rdma", Effect: corev1.TaintEffectNoSchedule}}}}
	c := fake.NewClientset(node)
	ctx := context.Background()
	l, err := NewNodeLabel(c, "a", "swift.io/runtime", "true")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := l.Get(ctx, "swift.io/runtime"); ok || err != nil {
		t.Fatalf("Get before = %v %v, want unset", ok, err)
	}
	v := "true"
	if err := l.Set(ctx, "swift.io/runtime", &v); err != nil {
		t.Fatal(err)
	}
	got, _ := c.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	if want := map[string]string{"zone": "z1", "swift.io/runtime": "true"}; len(got.Labels) != 2 || got.Labels["zone"] != "z1" || got.Labels["swift.io/runtime"] != "true" {
		t.Errorf("labels = %v, want %v", got.Labels, want)
	}
	if s, ok, _ := l.Get(ctx, "swift.io/runtime"); !ok || s != "true" {
		t.Errorf("Get = %q %v", s, ok)
	}
	if err := l.Set(ctx, "swift.io/runtime", nil); err != nil {
		t.Fatal(err)
	}
	got, _ = c.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	if len(got.Labels) != 1 || got.Labels["zone"] != "z1" || got.Annotations["n"] != "1" || len(got.Spec.Taints) != 1 {
		t.Errorf("node after removal = %+v", got)
	}
	for _, tc := range []struct{ node, key, value string }{
		{"", "swift.io/runtime", "true"}, {"a", "swift.io/", "true"}, {"a", "swift.io/runtime", "not a value"},
	} {
		if _, err := NewNodeLabel(c, tc.node, tc.key, tc.value); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("NewNodeLabel(%q, %q, %q) = %v, want invalid argument", tc.node, tc.key, tc.value, err)
		}
	}
	l, _ = NewNodeLabel(c, "b", "swift.io/runtime", "true")
	if _, _, err := l.Get(ctx, "swift.io/runtime"); err == nil {
		t.Error("a node that does not exist: no error")
	}
}

// The installer's pod uninstalls only when its DaemonSet is gone or
// being deleted.
func TestDeparting(t *testing.T) {
	ctx := context.Background()
	now := metav1.NewTime(time.Now())
	for _, tc := range []struct {
		name string
		ds   *appsv1.DaemonSet
		want bool
	}{
		{"running", &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "swift-install", Namespace: "swift"}}, false},
		{"being deleted", &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "swift-install", Namespace: "swift",
			DeletionTimestamp: &now, Finalizers: []string{"foregroundDeletion"}}}, true},
		{"gone", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset()
			if tc.ds != nil {
				c = fake.NewClientset(tc.ds)
			}
			got, err := Departing(ctx, c, "swift", "swift-install")
			if err != nil || got != tc.want {
				t.Errorf("Departing = %v %v, want %v", got, err, tc.want)
			}
		})
	}
	c := fake.NewClientset(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "swift-install", Namespace: "swift"}})
	if err := DeleteAndWait(ctx, c, "swift", "swift-install", 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if gone, _ := Departing(ctx, c, "swift", "swift-install"); !gone {
		t.Error("DeleteAndWait left the DaemonSet")
	}
	if err := DeleteAndWait(ctx, c, "swift", "swift-install", 10*time.Millisecond); err != nil {
		t.Errorf("DeleteAndWait of none: %v", err)
	}
}
