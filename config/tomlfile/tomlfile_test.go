package tomlfile

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/pelletier/go-toml/v2"
)

type sub struct {
	N     int64             `toml:"n"`
	Small uint32            `toml:"small"`
	On    bool              `toml:"on"`
	Env   map[string]string `toml:"env"`
}

type item struct {
	Names []string `toml:"names"`
	Limit *int64   `toml:"limit"`
	Text  *string  `toml:"text"`
}

type doc struct {
	Name  string          `toml:"name"`
	Ratio float64         `toml:"ratio"`
	Sub   sub             `toml:"sub"`
	Items map[string]item `toml:"items"`
	List  *[]string       `toml:"list"`
}

func TestDecode(t *testing.T) {
	seven, x := int64(7), "x"
	tests := []struct {
		name string
		in   string
		want doc
	}{
		{"empty", "", doc{Name: "default"}},
		{"everything", "name = \"n\"\nratio = 2\nlist = [\"a\"]\n[sub]\nn = -3\nsmall = 4294967295\non = true\n[sub.env]\nA = \"1\"\n" +
			"[items.one]\nnames = [\"p\", \"q\"]\nlimit = 7\ntext = \"x\"\n",
			doc{Name: "n", Ratio: 2, List: &[]string{"a"}, Sub: sub{N: -3, Small: 4294967295, On: true, Env: map[string]string{"A": "1"}},
				Items: map[string]item{"one": {Names: []string{"p", "q"}, Limit: &seven, Text: &x}}}},
		{"inline tables and dotted keys", "sub = { n = 1, env = { B = \"2\" } }\nitems.two.names = []\n",
			doc{Name: "default", Sub: sub{N: 1, Env: map[string]string{"B": "2"}}, Items: map[string]item{"two": {Names: []string{}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := doc{Name: "default"}
			_, probs, parsed := Decode([]byte(tc.in), &got)
			if !parsed {
				t.Fatal("parsed = false")
			}
			if len(probs) != 0 {
				t.Fatalf("problems: %v", probs)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// Every problem of a file, by the key as the file spells it, with its line.
func TestDecodeProblems(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"string for an integer", "[sub]\nn = \"16\"",
			[]string{"line 2: sub.n: want an integer, got a TOML string"}},
		{"integer for a string", "name = 5",
			[]string{"line 1: name: want a string, got a TOML integer"}},
		{"integer for a table", "sub = 3",
			[]string{"line 1: sub: want a table, got a TOML integer"}},
		{"array for a table of strings", "[sub]\nenv = [\"A=1\"]",
			[]string{"line 2: sub.env: want a table of strings, got a TOML array"}},
		{"integer in a table of strings", "[sub.env]\nA = 1",
			[]string{"line 2: sub.env.A: want a string, got a TOML integer"}},
		{"string for a bool", "[sub]\non = \"yes\"",
			[]string{"line 2: sub.on: want true or false, got a TOML string"}},
		{"float for an integer", "[sub]\nn = 1.5",
			[]string{"line 2: sub.n: want an integer, got a TOML float"}},
		{"date for a string", "name = 1979-05-27",
			[]string{"line 1: name: want a string, got a TOML date"}},
		{"negative for a uint32", "[sub]\n\nsmall = -1",
			[]string{"line 3: sub.small: -1: want an integer from 0 to 4294967295"}},
		{"uint32 overflow", "[sub]\nsmall = 4294967296",
			[]string{"line 2: sub.small: 4294967296: want an integer from 0 to 4294967295"}},
		{"inline table value", "sub = { n = \"x\" }",
			[]string{"line 1: sub.n: want an integer, got a TOML string"}},
		{"element of an array", "[items.a]\nnames = [\"p\",\n  3]",
			[]string{"line 3: items.a.names[1]: want a string, got a TOML integer"}},
		{"string for an array", "list = \"a\"",
			[]string{"line 1: list: want an array of strings, got a TOML string"}},
		{"array of tables for a table", "[[sub]]\nn = 1",
			[]string{"line 1: sub: want a table, got a TOML array of tables"}},
		{"table through a bool", "[sub.on.x]",
			[]string{"line 1: sub.on: want true or false, got a TOML table"}},
		{"quoted keys", "[items.\"a b\"]\nlimit = \"x\"\n[sub.env]\n\"K=V\" = 1",
			[]string{`line 2: items."a b".limit: want an integer, got a TOML string`, `line 4: sub.env."K=V": want a string, got a TOML integer`}},
		{"unknown keys", "nme = 1\n[sub]\nm = 2\n[items.a]\nlimits = 3\n[extra]\nport = 1",
			[]string{
				"line 1: nme: unknown key (known here: name, ratio, [sub], [items.NAME], list)",
				"line 3: sub.m: unknown key (known here: n, small, on, [sub.env])",
				"line 5: items.a.limits: unknown key (known here: names, limit, text)",
				"line 6: extra: unknown key (known here: name, ratio, [sub], [items.NAME], list)",
			}},
		{"all at once, in line order", "x = 1\n[sub]\nn = \"a\"\non = 2\n[items.a]\nnames = \"b\"",
			[]string{
				"line 1: x: unknown key (known here: name, ratio, [sub], [items.NAME], list)",
				"line 3: sub.n: want an integer, got a TOML string",
				"line 4: sub.on: want true or false, got a TOML integer",
				"line 6: items.a.names: want an array of strings, got a TOML string",
			}},
		{"syntax", "name = ", []string{"line 1: column 7: expected value, not end of input"}},
		{"syntax without a key", "\n\n[sub\n", []string{"line 3: column 5: expected ']' to close table name"}},
		{"duplicate key", "[items.a]\nlimit = 1\nlimit = 2", []string{"line 3: items.a.limit: key items.a.limit is set twice"}},
		{"duplicate table", "[sub]\n[sub]", []string{"line 2: sub: table [sub] is defined twice"}},
		{"integer too large", "[sub]\nn = 99999999999999999999", []string{"line 2: sub.n: decimal number is too large to fit in a 64-bit signed integer"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := doc{Name: "default"}
			_, probs, _ := Decode([]byte(tc.in), &v)
			var got []string
			for _, p := range probs {
				got = append(got, p.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("problems\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// A mistyped value leaves its field (and its whole array or table) as it was.
func TestDecodeKeepsDefaults(t *testing.T) {
	v := doc{Name: "default", Sub: sub{N: 9, Small: 3}}
	_, probs, _ := Decode([]byte("name = 1\nlist = [\"a\", 2]\n[sub]\nn = \"x\"\nsmall = 4\n"), &v)
	if len(probs) != 3 {
		t.Fatalf("problems = %v, want 3", probs)
	}
	want := doc{Name: "default", Sub: sub{N: 9, Small: 4}}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("got %+v, want %+v", v, want)
	}
}

func TestPositionsLine(t *testing.T) {
	pos, probs, _ := Decode([]byte("name = \"a\"\n\n[items.b]\nnames = [\n  \"x\",\n  \"y\"]\n[items.\"c d\"]\nnames = [\"z\"]\n"), &doc{})
	if len(probs) != 0 {
		t.Fatal(probs)
	}
	for key, want := range map[string]int{
		"name": 1, "items": 3, "items.b": 3, "items.b.names": 4, "items.b.names[1]": 6,
		"items.b.names[7]": 4, "items.b.limit": 3, "nothing": 0, "": 0,
		`items."c d"`: 7, "items.c d": 7, `items."c d".names[0]`: 8, "items.c d.names": 8,
	} {
		if got := pos.Line(key); got != want {
			t.Errorf("Line(%q) = %d, want %d", key, got, want)
		}
	}
	var none *Positions
	if none.Line("name") != 0 {
		t.Error("nil Positions: want line 0")
	}
}

func TestError(t *testing.T) {
	err := error(&Error{What: "tenant policy", File: "/p.toml", Problems: []Problem{
		{Line: 2, Key: "a", Msg: "bad"}, {Key: "b", Msg: "worse"}, {Msg: "no tenant"},
	}})
	if got, want := err.Error(), "tenant policy /p.toml: line 2: a: bad; b: worse; no tenant"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errdefs.IsInvalidArgument(err) {
		t.Error("not InvalidArgument")
	}
	var e *Error
	if !errors.As(err, &e) || len(e.Problems) != 3 {
		t.Error("errors.As *Error")
	}
}

func TestQuoteKey(t *testing.T) {
	for in, want := range map[string]string{
		"a": "a", "A_b-9": "A_b-9", "a b": `"a b"`, "": `""`, "a.b": `"a.b"`, "q\"\\": `"q\"\\"`, "nul\x00": `"nul\u0000"`, "é": `"é"`,
	} {
		if got := quoteKey(in); got != want {
			t.Errorf("quoteKey(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/etc/a.toml": `"/etc/a.toml"`,
		`a"b\c`:       `"a\"b\\c"`,
		"t\tn\n\x01":  `"t\tn\n\u0001"`,
		"é":           `"é"`,
	} {
		got := Quote(in)
		if got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
		var tree map[string]any
		if err := toml.Unmarshal([]byte("K = "+got), &tree); err != nil || tree["K"] != in {
			t.Errorf("Quote(%q) = %s does not parse back: %v %v", in, got, tree, err)
		}
	}
}

func TestDecodeNeedsStructPointer(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "pointer to a struct") {
			t.Fatalf("recover() = %v", r)
		}
	}()
	Decode(nil, doc{})
}

// A table of tables keeps an entry with a mistyped key, with its other
// keys, so that validation sees them; a file that does not parse leaves v
// as it was and says so.
func TestDecodePartialTables(t *testing.T) {
	var v doc
	_, probs, parsed := Decode([]byte("[items.a]\nnames = \"x\"\nlimit = 3\n[items.b]\nnames = [1]\n"), &v)
	if !parsed || len(probs) != 2 {
		t.Fatalf("parsed %v, problems %v", parsed, probs)
	}
	three := int64(3)
	want := map[string]item{"a": {Limit: &three}, "b": {}}
	if !reflect.DeepEqual(v.Items, want) {
		t.Fatalf("items = %+v, want %+v", v.Items, want)
	}
	v = doc{Name: "kept"}
	_, probs, parsed = Decode([]byte("name = \"x\"\n[sub\n"), &v)
	if parsed || len(probs) != 1 || v.Name != "kept" {
		t.Fatalf("parsed %v, problems %v, name %q; want not parsed, one problem, name kept", parsed, probs, v.Name)
	}
}
