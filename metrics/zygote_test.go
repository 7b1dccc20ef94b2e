package metrics

import (
	"maps"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func TestParseStatus(t *testing.T) {
	rows := func(v ...int) map[string]int {
		m := map[string]int{}
		for i, s := range RowStates {
			m[s] = v[i]
		}
		return m
	}
	tests := []struct {
		name      string
		in        string
		rows      map[string]int
		peers     map[string]int
		wantError string
	}{
		{"the zygote's own", goodStatus, rows(6, 3, 1, 1, 0, 1, 0, 2, 8), map[string]int{"connected": 2, "waiting": 1}, ""},
		{"no device", "zygote a tenant t device none provider none share n/a gid -1\npeer b h:1 waiting free 0 assigned 0\n", nil, map[string]int{"waiting": 1}, ""},
		{"empty", "", nil, map[string]int{}, ""},
		{"unknown key", "rows total=1 free=1 assigned=0 held=0 pending=0 reclaim=0 broken=0 own=0 limit=0 stolen=9\n", nil, nil, `"stolen=9"`},
		{"a figure missing", "rows total=1 free=1\n", nil, nil, "has 2 of the 9 figures"},
		{"a figure twice", "rows total=1 total=2 assigned=0 held=0 pending=0 reclaim=0 broken=0 own=0 limit=0\n", nil, nil, "total twice"},
		{"negative", "rows total=-1 free=1 assigned=0 held=0 pending=0 reclaim=0 broken=0 own=0 limit=0\n", nil, nil, `"total=-1"`},
		{"too big", "rows total=99999999 free=1 assigned=0 held=0 pending=0 reclaim=0 broken=0 own=0 limit=0\n", nil, nil, `"total=99999999"`},
		{"signed", "rows total=+1 free=1 assigned=0 held=0 pending=0 reclaim=0 broken=0 own=0 limit=0\n", nil, nil, `"total=+1"`},
		{"two rows lines", "rows total=0 free=0 assigned=0 held=0 pending=0 reclaim=0 broken=0 own=0 limit=0\nrows total=0\n", nil, nil, "a second rows line"},
		{"a peer state made up", "peer b h:1 hijacked free 0 assigned 0\n", nil, nil, "without a state"},
		{"a bare peer line", "peer b\n", nil, nil, "without a state"},
		{"too many peers", strings.Repeat("peer b h:1 connected free 0 assigned 0\n", 33), nil, nil, "more than 32 peers"},
		{"too long", strings.Repeat("x", maxStatus+1), nil, nil, "at most 98304"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseStatus([]byte(tc.in))
			if tc.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantError) || !errdefs.IsInvalidArgument(err) {
					t.Fatalf("error %v: want InvalidArgument with %q", err, tc.wantError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(p.Rows, tc.rows) || !maps.Equal(p.Peers, tc.peers) {
				t.Fatalf("got rows %v peers %v, want %v %v", p.Rows, p.Peers, tc.rows, tc.peers)
			}
		})
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(goodStatus))
	f.Add([]byte("rows total=0 free=0 assigned=0 held=0 pending=0 reclaim=0 broken=0 own=0 limit=0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParseStatus(b)
		if err != nil {
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("error of no class: %v", err)
			}
			return
		}
		n := 0
		for s, v := range p.Peers {
			if !known(PeerStates, s) || v < 0 {
				t.Fatalf("peers %v", p.Peers)
			}
			n += v
		}
		if n > maxPeers || (p.Rows != nil && len(p.Rows) != len(RowStates)) {
			t.Fatalf("accepted %d peers, rows %v", n, p.Rows)
		}
		for _, v := range p.Rows {
			if v < 0 || v > 65535 {
				t.Fatalf("rows %v", p.Rows)
			}
		}
	})
}
