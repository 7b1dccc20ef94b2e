package verbs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containerd/errdefs"
)

// DefaultConfigDir is libibverbs' provider configuration directory
// (IBV_CONFIG_DIR, fixed when rdma-core is built).
const DefaultConfigDir = "/etc/libibverbs.d"

// DriverFile is one file of a libibverbs.d directory.
type DriverFile struct {
	Name    string   // file name, e.g. rxe.driver
	Drivers []string // the names of its "driver NAME" lines
	Data    []byte
}

// ReadConfigDir reads the regular files of a libibverbs.d directory the
// way libibverbs does (every regular file, "driver NAME" lines).
func ReadConfigDir(dir string) ([]DriverFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("provider config directory %s: %w", dir, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var files []DriverFile
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		files = append(files, DriverFile{Name: e.Name(), Drivers: parseDriverLines(b), Data: b})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

func parseDriverLines(b []byte) []string {
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "driver" {
			names = append(names, f[1])
		}
	}
	return names
}

// StockDrivers lists every provider name the files name, sorted, once each.
func StockDrivers(files []DriverFile) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		for _, d := range f.Drivers {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	sort.Strings(out)
	return out
}

// SelectDrivers returns the files that name at least one needed provider,
// and the needed providers no file names.
func SelectDrivers(files []DriverFile, needed []string) (selected []DriverFile, missing []string) {
	want := map[string]bool{}
	for _, n := range needed {
		want[n] = true
	}
	found := map[string]bool{}
	for _, f := range files {
		hit := false
		for _, d := range f.Drivers {
			if want[d] {
				hit, found[d] = true, true
			}
		}
		if hit {
			selected = append(selected, f)
		}
	}
	for _, n := range needed {
		if !found[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	return selected, missing
}
