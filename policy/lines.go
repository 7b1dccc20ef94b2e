package policy

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// positions maps dotted keys ("tenants.a.node.qps", "tenants.a.peers[1]")
// to the line that sets them, from go-toml's syntax tree.
type positions struct {
	lines       map[string]int
	keys        map[int]string // the first key set on each line
	arrayTables []struct {
		key  string
		line int
	}
	// explicit holds keys set by a key/value or a [table] header; dup is
	// the first one set twice (go-toml reports duplicates without a line).
	explicit map[string]bool
	dup      *Problem
}

// line returns the line of key, else of its closest enclosing key; 0 when unknown.
func (p positions) line(key string) int {
	for key != "" {
		if l, ok := p.lines[key]; ok {
			return l
		}
		if i := strings.LastIndexAny(key, ".["); i >= 0 {
			key = key[:i]
		} else {
			break
		}
	}
	return 0
}

// keyLines parses data with go-toml's parser and records key positions.
func keyLines(data []byte) (positions, error) {
	pos := positions{lines: map[string]int{}, keys: map[int]string{}, explicit: map[string]bool{}}
	var p unstable.Parser
	p.Reset(data)
	table := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			table = keyPath(e.Key())
			pos.record(&p, table, e.Child())
			pos.define(&p, table, e.Child(), "table [%s] is defined twice")
		case unstable.ArrayTable:
			table = keyPath(e.Key())
			pos.arrayTables = append(pos.arrayTables, struct {
				key  string
				line int
			}{table, lineOf(&p, e.Child())})
		case unstable.KeyValue:
			pos.keyValue(&p, table, e)
		}
	}
	return pos, p.Error()
}

// define notes an explicit definition of key and remembers the first duplicate.
func (pos *positions) define(p *unstable.Parser, key string, n *unstable.Node, format string) {
	if pos.explicit[key] && pos.dup == nil {
		pos.dup = &Problem{Line: lineOf(p, n), Key: key, Msg: fmt.Sprintf(format, key)}
	}
	pos.explicit[key] = true
}

func (pos *positions) keyValue(p *unstable.Parser, prefix string, kv *unstable.Node) {
	full := join(prefix, keyPath(kv.Key()))
	first := kv.Key()
	first.Next()
	pos.record(p, full, first.Node())
	pos.define(p, full, first.Node(), "key %s is set twice")
	switch v := kv.Value(); v.Kind {
	case unstable.Array:
		it := v.Children()
		for i := 0; it.Next(); i++ {
			if l := lineOf(p, it.Node()); l > 0 {
				pos.lines[fmt.Sprintf("%s[%d]", full, i)] = l
			}
		}
	case unstable.InlineTable:
		it := v.Children()
		for it.Next() {
			if it.Node().Kind == unstable.KeyValue {
				pos.keyValue(p, full, it.Node())
			}
		}
	}
}

func (pos *positions) record(p *unstable.Parser, key string, n *unstable.Node) {
	l := lineOf(p, n)
	if l == 0 {
		return
	}
	if _, ok := pos.lines[key]; !ok {
		pos.lines[key] = l
	}
	if _, ok := pos.keys[l]; !ok {
		pos.keys[l] = key
	}
	// Parents set implicitly by a dotted key or table header live here too.
	for k := key; strings.Contains(k, "."); {
		k = k[:strings.LastIndex(k, ".")]
		if _, ok := pos.lines[k]; !ok {
			pos.lines[k] = l
		}
	}
}

func lineOf(p *unstable.Parser, n *unstable.Node) (line int) {
	if n == nil || n.Raw.Length == 0 {
		return 0
	}
	defer func() {
		if recover() != nil {
			line = 0
		}
	}()
	return p.Shape(n.Raw).Start.Line
}

func keyPath(it unstable.Iterator) string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return strings.Join(parts, ".")
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

var typeRe = regexp.MustCompile(`cannot decode TOML (\w+( \w+)?) into struct field \S+ of type (\S+)`)

// decodeProblems turns a go-toml decode error into problems with lines
// and policy keys instead of Go field names.
func decodeProblems(err error, pos positions) []Problem {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) {
		var out []Problem
		for _, e := range sm.Errors {
			row, _ := e.Position()
			out = append(out, Problem{Line: row, Key: strings.Join(e.Key(), "."), Msg: "unknown key" + knownHint(e.Key())})
		}
		return out
	}
	if pos.dup != nil && (strings.Contains(err.Error(), "already defined") || strings.Contains(err.Error(), "already exists")) {
		return []Problem{*pos.dup}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		key := pos.keys[row]
		if m := typeRe.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("want %s, got a TOML %s", goType(m[3]), m[1])
		} else if key == "" {
			msg = fmt.Sprintf("column %d: %s", col, msg)
		}
		return []Problem{{Line: row, Key: key, Msg: msg}}
	}
	msg := strings.TrimPrefix(err.Error(), "toml: ")
	if m := typeRe.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("want %s, got a TOML %s", goType(m[3]), m[1])
	}
	return []Problem{{Msg: msg}}
}

func goType(t string) string {
	switch strings.TrimPrefix(t, "*") {
	case "int64":
		return "an integer"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "[]string":
		return "an array of strings"
	}
	if strings.HasPrefix(t, "map[") || strings.Contains(t, "policy.raw") {
		return "a table"
	}
	return t
}

// knownHint lists the keys allowed where an unknown one was found.
func knownHint(key []string) string {
	var known string
	switch {
	case len(key) == 1:
		known = "local_tenant, [tenants.NAME]"
	case len(key) == 3 && key[0] == "tenants":
		known = "namespaces, claimable_from, local, devices, peers, fork_sharing, seccomp, key_file, [container], [node]"
	case len(key) == 4 && key[2] == "container":
		known = "qps, hca_handle, hca_object, memlock"
	case len(key) == 4 && key[2] == "node":
		known = "containers, qps, hca_handle, hca_object, memlock"
	default:
		return ""
	}
	return " (known here: " + known + ")"
}
