package harness

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ShimProcs maps the pids of containerd shims serving container id (their
// command line has -id id) to their argv[0].
func ShimProcs(id string) map[string]string {
	ents, _ := os.ReadDir("/proc")
	procs := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if !strings.Contains(args[0], "containerd-shim") {
			continue
		}
		for i, a := range args {
			if a == "-id" && i+1 < len(args) && args[i+1] == id {
				procs[e.Name()] = args[0]
			}
		}
	}
	return procs
}

// ShimPIDs lists the pids of ShimProcs(id), sorted.
func ShimPIDs(id string) []string {
	var pids []string
	for pid := range ShimProcs(id) {
		pids = append(pids, pid)
	}
	sort.Strings(pids)
	return pids
}
