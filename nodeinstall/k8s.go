package nodeinstall

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// NodeLabel is a Labeler of a node through the API server. It changes
// the one label with a JSON merge patch, and nothing else of the node.
type NodeLabel struct {
	client     kubernetes.Interface
	node       string
	key, value string
}

// NewNodeLabel checks the label's key and value.
func NewNodeLabel(c kubernetes.Interface, node, key, value string) (*NodeLabel, error) {
	if node == "" {
		return nil, fmt.Errorf("no node name: %w", errdefs.ErrInvalidArgument)
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return nil, fmt.Errorf("node label key %q: %v: %w", key, errs, errdefs.ErrInvalidArgument)
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return nil, fmt.Errorf("node label value %q: %v: %w", value, errs, errdefs.ErrInvalidArgument)
	}
	return &NodeLabel{client: c, node: node, key: key, value: value}, nil
}

// Key implements Labeler.
func (l *NodeLabel) Key() string { return l.key }

// Value implements Labeler.
func (l *NodeLabel) Value() string { return l.value }

// Get implements Labeler.
func (l *NodeLabel) Get(ctx context.Context, key string) (string, bool, error) {
	n, err := l.client.CoreV1().Nodes().Get(ctx, l.node, metav1.GetOptions{})
	if err != nil {
		return "", false, fmt.Errorf("node %s: %w", l.node, err)
	}
	v, ok := n.Labels[key]
	return v, ok, nil
}

// Set implements Labeler.
func (l *NodeLabel) Set(ctx context.Context, key string, value *string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{key: value}}})
	if err != nil {
		return err
	}
	if _, err := l.client.CoreV1().Nodes().Patch(ctx, l.node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "swift-install"}); err != nil {
		return fmt.Errorf("label node %s %s: %w", l.node, key, err)
	}
	return nil
}

// Departing tells whether the installer's DaemonSet is being deleted (it
// is gone, or has a deletion timestamp): the installer's pod then
// uninstalls as it stops; otherwise (a rolling update, a drain, a
// restart) it leaves Swift installed. An error says nothing either way.
func Departing(ctx context.Context, c kubernetes.Interface, namespace, name string) (bool, error) {
	ds, err := c.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("daemonset %s/%s: %w", namespace, name, err)
	}
	return ds.DeletionTimestamp != nil, nil
}

// DeleteAndWait deletes the DaemonSet in the foreground and waits until
// it is gone, that is until each of its pods has stopped (and so
// uninstalled): the chart's pre-delete hook, so that the installer pods
// still hold their RBAC while they take Swift off the nodes.
func DeleteAndWait(ctx context.Context, c kubernetes.Interface, namespace, name string, poll time.Duration) error {
	fg := metav1.DeletePropagationForeground
	err := c.AppsV1().DaemonSets(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete daemonset %s/%s: %w", namespace, name, err)
	}
	t0 := time.Now()
	for {
		_, err := c.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			log.G(ctx).Infof("daemonset %s/%s is gone after %s: its pods uninstalled Swift", namespace, name, time.Since(t0).Round(time.Second))
			return nil
		}
		if err != nil {
			log.G(ctx).WithError(err).Warnf("daemonset %s/%s", namespace, name)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("daemonset %s/%s not gone after %s: %w", namespace, name, time.Since(t0).Round(time.Second), ctx.Err())
		case <-time.After(poll):
		}
	}
}
