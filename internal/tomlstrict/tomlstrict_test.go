package tomlstrict

import (
	"errors"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

type doc struct {
	Name string            `toml:"name"`
	On   bool              `toml:"on"`
	Env  map[string]string `toml:"env"`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name, in string
		want     doc
		err      string
	}{
		{"good", "name = \"a\"\non = true\n[env]\nK = \"v\"", doc{Name: "a", On: true, Env: map[string]string{"K": "v"}}, ""},
		{"unknown key", "nme = \"a\"", doc{}, "strict mode"},
		{"wrong type", "on = \"yes\"", doc{}, "cannot decode"},
		{"table through a string", "[name.x]", doc{}, "table"},
		{"table through a map value", "[env.K.x]", doc{}, "table"},
		{"syntax", "name = ", doc{}, "expected"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got doc
			err := Decode([]byte(tc.in), &got)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if got.Name != tc.want.Name || got.On != tc.want.On || len(got.Env) != len(tc.want.Env) || got.Env["K"] != tc.want.Env["K"] {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Decode(%q) = %v, want an error containing %q", tc.in, err, tc.err)
			}
		})
	}
}

func TestDecodeKeepsStrictMissingError(t *testing.T) {
	var d doc
	err := Decode([]byte("a = 1\nb = 2"), &d)
	var sm *toml.StrictMissingError
	if !errors.As(err, &sm) || len(sm.Errors) != 2 {
		t.Fatalf("error %v (%T) is not a StrictMissingError with 2 keys", err, err)
	}
}

type panicky struct{}

func (panicky) UnmarshalText([]byte) error { panic("boom") }

func TestDecodeRecoversPanic(t *testing.T) {
	var v struct {
		P panicky `toml:"p"`
	}
	err := Decode([]byte("p = \"x\""), &v)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Decode = %v, want the recovered panic as an error", err)
	}
}
