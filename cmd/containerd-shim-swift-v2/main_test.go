package main

import "testing"

func TestWantsVersion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--version"}, true},
		{[]string{"-v"}, true},
		{[]string{"-debug", "--version"}, true},
		{nil, false},
		{[]string{"start"}, false},
		{[]string{"-namespace", "k8s.io", "-id", "x", "start"}, false},
		{[]string{"-namespace", "k8s.io", "-id", "x", "--version"}, true},
		{[]string{"-id", "-v", "start"}, false},  // -v is the id
		{[]string{"delete", "--version"}, false}, // after the action: not a flag
		{[]string{"--", "--version"}, false},
	} {
		if got := wantsVersion(tc.args); got != tc.want {
			t.Errorf("wantsVersion(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
