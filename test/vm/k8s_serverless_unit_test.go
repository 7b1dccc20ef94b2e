//go:build e2e

package vm

import "testing"

// TestRevisionPod: the pod a Knative revision runs, from a Service's
// template: literal.
func TestRevisionPod(t *testing.T) {
	for _, tc := range []struct{ name, ksvc, want, err string }{
		{"the example's shape", `apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: fn
  namespace: ns
spec:
  template:
    metadata:
      labels: {app: x}
      annotations: {swift.io/zygote: "true"}
    spec:
      runtimeClassName: swift-podnet
      containerConcurrency: 4
      timeoutSeconds: 60
      containers:
        - image: img
          command: [gw]
          ports: [{containerPort: 9000}]
`, `apiVersion: v1
kind: Pod
metadata:
  annotations:
    swift.io/zygote: "true"
  labels:
    app: x
    serving.knative.dev/revision: fn-00001
    serving.knative.dev/service: fn
  name: fn-00001-deployment
  namespace: ns
spec:
  containers:
  - command:
    - gw
    env:
    - name: PORT
      value: "9000"
    image: img
    name: user-container
    ports:
    - containerPort: 9000
  runtimeClassName: swift-podnet
  terminationGracePeriodSeconds: 60
`, ""},
		{"a named container and env of its own, port 8080 by default", `apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: fn, namespace: ns}
spec:
  template:
    spec:
      containers:
        - {name: main, image: img, env: [{name: A, value: b}]}
`, `apiVersion: v1
kind: Pod
metadata:
  labels:
    serving.knative.dev/revision: fn-00001
    serving.knative.dev/service: fn
  name: fn-00001-deployment
  namespace: ns
spec:
  containers:
  - env:
    - name: A
      value: b
    - name: PORT
      value: "8080"
    image: img
    name: main
  terminationGracePeriodSeconds: 300
`, ""},
		{"not Knative", "apiVersion: v1\nkind: Service\nmetadata: {name: fn}\n", "", `not a Knative Service: "apiVersion: v1 | kind: Service"`},
		{"two containers", "apiVersion: serving.knative.dev/v1\nkind: Service\nspec:\n  template:\n    spec:\n      containers: [{image: a}, {image: b}]\n",
			"", "the Knative Service's template has 2 containers, want 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := revisionPod(tc.ksvc, "00001")
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
