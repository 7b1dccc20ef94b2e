package nodeconf

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/swift-rdma/swift-containerd/annotations"
)

// Ref names a namespaced object.
type Ref struct{ Namespace, Name string }

func (r Ref) String() string { return r.Namespace + "/" + r.Name }

// Set tells whether the reference names an object.
func (r Ref) Set() bool { return r.Name != "" }

// ParseRef reads NAMESPACE/NAME ("" is no object).
func ParseRef(s string) (Ref, error) {
	if s == "" {
		return Ref{}, nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || !annotations.IsLabel(ns) || name == "" || len(name) > 253 || strings.ContainsAny(name, "/ ") {
		return Ref{}, fmt.Errorf("%q: want NAMESPACE/NAME: %w", s, errdefs.ErrInvalidArgument)
	}
	return Ref{ns, name}, nil
}

// Watch keeps the node's tenant policy in line with ConfigMap policy's
// policy.toml and its keyrings with Secret ring's entries (a reference
// that is not Set is not watched) until ctx ends, through in. Every
// update is applied as it comes; one that fails validation is logged and
// changes nothing, and the informer's resync (every resync) tries again.
// A deleted ConfigMap leaves the policy as it was (the last good one),
// and a deleted Secret the rings (deleting the namespace swift-system must
// not revoke every tenant's keys on every node): a ring is removed when it
// leaves a Secret that is still there.
func Watch(ctx context.Context, client kubernetes.Interface, in *Installer, policy, rings Ref, resync time.Duration) {
	run := func(ref Ref, resource string, obj runtime.Object, apply func(any, bool)) {
		lg := log.G(ctx).WithField(strings.TrimSuffix(resource, "s"), ref.String())
		sel := fields.OneTermEqualSelector("metadata.name", ref.Name).String()
		lw := &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.FieldSelector = sel
				if resource == "secrets" {
					return client.CoreV1().Secrets(ref.Namespace).List(ctx, o)
				}
				return client.CoreV1().ConfigMaps(ref.Namespace).List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = sel
				if resource == "secrets" {
					return client.CoreV1().Secrets(ref.Namespace).Watch(ctx, o)
				}
				return client.CoreV1().ConfigMaps(ref.Namespace).Watch(ctx, o)
			},
		}
		// only the object named: the field selector says so, and so does
		// this check (a client that ignores selectors)
		mine := func(o any) bool {
			m, ok := o.(metav1.Object)
			return ok && m.GetNamespace() == ref.Namespace && m.GetName() == ref.Name
		}
		inf := cache.NewSharedIndexInformerWithOptions(lw, obj, cache.SharedIndexInformerOptions{ResyncPeriod: resync})
		if _, err := inf.AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) {
				if mine(o) {
					apply(o, false)
				}
			},
			UpdateFunc: func(_, o any) {
				if mine(o) {
					apply(o, false)
				}
			},
			DeleteFunc: func(o any) { apply(o, true) },
		}, cache.HandlerOptions{ResyncPeriod: &resync}); err != nil {
			lg.WithError(err).Error("cannot watch it")
			return
		}
		// a wrong name or missing rights: said where the operator looks
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			lg.WithError(err).Warn("cannot watch it: the node keeps what it has")
		}); err != nil {
			lg.WithError(err).Warn("watch error handler")
		}
		go inf.RunWithContext(ctx)
	}
	if policy.Set() {
		lg := log.G(ctx).WithField("configmap", policy.String())
		run(policy, "configmaps", &corev1.ConfigMap{}, func(o any, deleted bool) {
			cm, ok := o.(*corev1.ConfigMap)
			if deleted || !ok {
				lg.Warn("the policy ConfigMap is gone: the node keeps its last tenant policy")
				return
			}
			data, ok := cm.Data[PolicyKey]
			if !ok {
				lg.Errorf("the policy ConfigMap has no %s: the node keeps its tenant policy", PolicyKey)
				return
			}
			changed, err := in.Policy([]byte(data))
			switch {
			case err != nil:
				lg.WithError(err).Error("tenant policy not installed")
			case changed:
				lg.WithField("path", in.PolicyPath).Info("installed the tenant policy")
			}
		})
	}
	if rings.Set() {
		lg := log.G(ctx).WithField("secret", rings.String())
		run(rings, "secrets", &corev1.Secret{}, func(o any, deleted bool) {
			s, ok := o.(*corev1.Secret)
			if deleted || !ok {
				lg.Warn("the keys Secret is gone: the node keeps its tenant keyrings")
				return
			}
			files := s.Data
			if files == nil {
				files = map[string][]byte{}
			}
			written, removed, err := in.Keys(files)
			if err != nil {
				lg.WithError(err).Error("tenant keyrings not installed")
				return
			}
			if len(written)+len(removed) > 0 {
				lg.WithField("written", written).WithField("removed", removed).WithField("dir", in.KeysDir).Info("installed the tenant keyrings")
			}
		})
	}
}
