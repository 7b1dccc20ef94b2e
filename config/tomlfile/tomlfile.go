// Package tomlfile decodes the project's TOML files (the node config, the
// tenant policy) into Go structs and reports what is wrong with a file the
// way its author wrote it: every unknown key and every value of the wrong
// type, in one pass, each with its line and its key path as the file
// spells it ("rdma.hca_handle: want an integer, got a TOML string"), never
// a Go type or struct field. A syntax error stops the decoding: it is the
// one problem reported then.
package tomlfile

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/pelletier/go-toml/v2"
)

// Problem is one thing wrong in a file.
type Problem struct {
	Line int    // 1-based; 0 when unknown
	Key  string // key path as the file spells it ("tenants.a.peers[1]"), when known
	Msg  string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error is a file with problems: every one found, in line order. It is an
// InvalidArgument error (errdefs.IsInvalidArgument).
type Error struct {
	// What the file is, for the message ("node config", "tenant policy").
	What     string
	File     string
	Problems []Problem
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("%s %s: %s", e.What, e.File, strings.Join(parts, "; "))
}

// Unwrap makes Error an InvalidArgument error.
func (e *Error) Unwrap() error { return errdefs.ErrInvalidArgument }

// Sort orders problems by line, keeping the order of problems on one line
// (and of those without a line, which come first).
func Sort(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Line < ps[j].Line })
}

// Decode decodes data into v, a pointer to a struct whose fields carry
// `toml` tags; fields the file does not set keep their values (defaults).
// It returns the positions of the file's keys (for problems found later,
// by validation), every problem of the file, and whether the file parsed.
// A value of the wrong type leaves its field as it was (an array with a
// wrong element is left out whole; a table keeps its other keys); an
// unknown key is skipped. When the file does not parse (a syntax error, a
// key defined twice), that is the only problem and v is left as it was.
func Decode(data []byte, v any) (pos *Positions, problems []Problem, parsed bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("tomlfile.Decode: want a pointer to a struct, got %T", v))
	}
	pos = keyLines(data)
	tree, err := unmarshal(data)
	if err != nil {
		return pos, []Problem{syntaxProblem(err, pos)}, false
	}
	d := &decoder{pos: pos}
	d.assign(rv.Elem(), tree, path{})
	Sort(d.problems)
	return pos, d.problems, true
}

// unmarshal decodes data into a generic tree; a panic inside the TOML
// decoder on hostile input becomes an error.
func unmarshal(data []byte) (tree map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			tree, err = nil, fmt.Errorf("toml: decoder failed on this input: %v", r)
		}
	}()
	err = toml.Unmarshal(data, &tree)
	return tree, err
}

// syntaxProblem turns go-toml's error for a file it cannot read into a
// problem with a line.
func syntaxProblem(err error, pos *Positions) Problem {
	if pos.dup != nil && (strings.Contains(err.Error(), "already defined") || strings.Contains(err.Error(), "already exists")) {
		return *pos.dup
	}
	msg := strings.TrimPrefix(err.Error(), "toml: ")
	var de *toml.DecodeError
	if !errors.As(err, &de) {
		return Problem{Msg: msg}
	}
	row, col := de.Position()
	key := pos.keys[row]
	if k := de.Key(); len(k) > 0 {
		key = spell(k)
	}
	if key == "" {
		msg = fmt.Sprintf("column %d: %s", col, msg)
	}
	return Problem{Line: row, Key: key, Msg: msg}
}

// path is a key path: raw joins the keys with dots (for Positions),
// spelled quotes those that are not bare keys (for messages).
type path struct{ raw, spelled string }

func (p path) key(k string) path {
	if p.raw == "" {
		return path{k, quoteKey(k)}
	}
	return path{p.raw + "." + k, p.spelled + "." + quoteKey(k)}
}

func (p path) index(i int) path {
	s := fmt.Sprintf("[%d]", i)
	return path{p.raw + s, p.spelled + s}
}

type decoder struct {
	pos      *Positions
	problems []Problem
}

func (d *decoder) add(p path, msg string) {
	d.problems = append(d.problems, Problem{Line: d.pos.Line(p.raw), Key: p.spelled, Msg: msg})
}

func (d *decoder) mistyped(p path, t reflect.Type, val any) {
	d.add(p, fmt.Sprintf("want %s, got a TOML %s", want(t), tomlType(val)))
}

// assign stores val into dst, reporting problems under p; it tells
// whether val was stored whole.
func (d *decoder) assign(dst reflect.Value, val any, p path) bool {
	t := dst.Type()
	switch t.Kind() {
	case reflect.Pointer:
		elem := reflect.New(t.Elem())
		if !d.assign(elem.Elem(), val, p) {
			return false
		}
		dst.Set(elem)
		return true
	case reflect.Interface:
		if !reflect.TypeOf(val).AssignableTo(t) {
			d.mistyped(p, t, val)
			return false
		}
		dst.Set(reflect.ValueOf(val))
		return true
	case reflect.String:
		s, ok := val.(string)
		if !ok {
			d.mistyped(p, t, val)
			return false
		}
		dst.SetString(s)
		return true
	case reflect.Bool:
		b, ok := val.(bool)
		if !ok {
			d.mistyped(p, t, val)
			return false
		}
		dst.SetBool(b)
		return true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := val.(int64)
		if !ok {
			d.mistyped(p, t, val)
			return false
		}
		if dst.OverflowInt(n) {
			lo, hi := intRange(t)
			d.add(p, fmt.Sprintf("%d: want an integer from %d to %d", n, lo, hi))
			return false
		}
		dst.SetInt(n)
		return true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := val.(int64)
		if !ok {
			d.mistyped(p, t, val)
			return false
		}
		if n < 0 || dst.OverflowUint(uint64(n)) {
			d.add(p, fmt.Sprintf("%d: want an integer from 0 to %d", n, uintMax(t)))
			return false
		}
		dst.SetUint(uint64(n))
		return true
	case reflect.Float32, reflect.Float64:
		switch f := val.(type) {
		case float64:
			dst.SetFloat(f)
		case int64:
			dst.SetFloat(float64(f))
		default:
			d.mistyped(p, t, val)
			return false
		}
		return true
	case reflect.Slice:
		list, ok := val.([]any)
		if !ok {
			d.mistyped(p, t, val)
			return false
		}
		out := reflect.MakeSlice(t, len(list), len(list))
		whole := true
		for i, x := range list {
			if !d.assign(out.Index(i), x, p.index(i)) {
				whole = false
			}
		}
		if whole {
			dst.Set(out)
		}
		return whole
	case reflect.Map:
		m, ok := val.(map[string]any)
		if !ok || t.Key().Kind() != reflect.String {
			d.mistyped(p, t, val)
			return false
		}
		if dst.IsNil() {
			dst.Set(reflect.MakeMapWithSize(t, len(m)))
		}
		whole := true
		for _, k := range slices.Sorted(maps.Keys(m)) {
			elem := reflect.New(t.Elem()).Elem()
			if !d.assign(elem, m[k], p.key(k)) {
				whole = false
				if _, isMap := m[k].(map[string]any); !isMap || !isTable(t.Elem()) {
					continue
				}
				// a table keeps what it got right, for validation to see
			}
			dst.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), elem)
		}
		return whole
	case reflect.Struct:
		m, ok := val.(map[string]any)
		if !ok {
			d.mistyped(p, t, val)
			return false
		}
		fields := fieldsOf(t)
		whole := true
		for _, k := range slices.Sorted(maps.Keys(m)) {
			i, ok := fields[k]
			if !ok {
				d.add(p.key(k), "unknown key (known here: "+known(t, p.spelled)+")")
				whole = false
				continue
			}
			if !d.assign(dst.Field(i), m[k], p.key(k)) {
				whole = false
			}
		}
		return whole
	}
	d.mistyped(p, t, val)
	return false
}

// fieldsOf maps the toml keys of struct t to field indices.
func fieldsOf(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		if k := tomlKey(t.Field(i)); k != "" {
			out[k] = i
		}
	}
	return out
}

func tomlKey(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	switch tag {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return tag
}

// known lists the keys of struct t in field order, tables as [full.path]
// (tables of tables as [full.path.NAME]).
func known(t reflect.Type, at string) string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		k := tomlKey(f)
		if k == "" {
			continue
		}
		full := quoteKey(k)
		if at != "" {
			full = at + "." + full
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, "["+full+"]")
		case ft.Kind() == reflect.Map && isTable(ft.Elem()):
			out = append(out, "["+full+".NAME]")
		case ft.Kind() == reflect.Map:
			out = append(out, "["+full+"]")
		default:
			out = append(out, quoteKey(k))
		}
	}
	return strings.Join(out, ", ")
}

func isTable(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct || t.Kind() == reflect.Map
}

// want names what a field of type t takes, for messages.
func want(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice:
		if e := plural[want(t.Elem())]; e != "" {
			return "an array of " + e
		}
		return "an array"
	case reflect.Map:
		if e := plural[want(t.Elem())]; e != "" && e != "tables" {
			return "a table of " + e
		}
		return "a table"
	case reflect.Struct:
		return "a table"
	}
	return "a value"
}

var plural = map[string]string{
	"a string": "strings", "an integer": "integers", "a number": "numbers",
	"true or false": "booleans", "a table": "tables",
}

// tomlType names the TOML type of a decoded value.
func tomlType(v any) string {
	switch x := v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case []any:
		if len(x) > 0 {
			for _, e := range x {
				if _, ok := e.(map[string]any); !ok {
					return "array"
				}
			}
			return "array of tables"
		}
		return "array"
	case map[string]any:
		return "table"
	case time.Time, toml.LocalDateTime:
		return "date-time"
	case toml.LocalDate:
		return "date"
	case toml.LocalTime:
		return "time"
	}
	return fmt.Sprintf("%T", v)
}

func intRange(t reflect.Type) (int64, int64) {
	bits := t.Bits()
	return -1 << (bits - 1), 1<<(bits-1) - 1
}

func uintMax(t reflect.Type) uint64 {
	if t.Bits() == 64 {
		return math.MaxUint64
	}
	return 1<<t.Bits() - 1
}

// quoteKey spells a key as TOML needs it: bare when it is made of
// A-Za-z0-9_- only, else a basic string.
func quoteKey(k string) string {
	bare := k != ""
	for i := 0; bare && i < len(k); i++ {
		c := k[i]
		bare = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if bare {
		return k
	}
	return Quote(k)
}

// Quote renders s as a TOML basic string.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Join spells the key k of the table at parent ("rdma.env", "A=B" gives
// rdma.env."A=B"), for problems found after decoding.
func Join(parent, k string) string {
	if parent == "" {
		return quoteKey(k)
	}
	return parent + "." + quoteKey(k)
}

// spell joins keys as the file spells a dotted key.
func spell(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = quoteKey(k)
	}
	return strings.Join(q, ".")
}
