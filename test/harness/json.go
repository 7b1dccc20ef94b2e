package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// MergeJSON sets keys in the JSON object stored at path, keeping the others.
func MergeJSON(path string, kv map[string]any) error {
	m := map[string]any{}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("%s is not a JSON object: %w", path, err)
		}
	}
	for k, v := range kv {
		m[k] = v
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
