// Package tomlstrict decodes the project's TOML files (node config, tenant
// policy, runtime options) in strict mode: unknown keys are errors, and a
// panic inside the TOML decoder on hostile input becomes an error instead of
// taking down the shim or swiftctl.
package tomlstrict

import (
	"bytes"
	"fmt"

	"github.com/pelletier/go-toml/v2"
)

// Decode decodes data into v, rejecting keys v has no field for.
func Decode(data []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("toml: decoder failed on this input: %v", r)
		}
	}()
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
