package tomlfile

import (
	"fmt"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Positions maps dotted keys ("tenants.a.node.qps", "tenants.a.peers[1]")
// to the line that sets them, from go-toml's syntax tree. A key is found
// both as the file spells it (rdma.env."A=B") and with its parts joined
// unquoted (rdma.env.A=B).
type Positions struct {
	lines map[string]int
	keys  map[int]string // the first key set on each line, spelled
	// explicit holds keys set by a key/value or a [table] header; dup is
	// the first one set twice (go-toml's message for it names no path).
	explicit map[string]bool
	dup      *Problem
}

// Line returns the line of key, else of its closest enclosing key; 0 when
// unknown.
func (pos *Positions) Line(key string) int {
	if pos == nil {
		return 0
	}
	for key != "" {
		if l, ok := pos.lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return 0
}

// keyLines parses data with go-toml's parser and records key positions,
// as far as the file parses.
func keyLines(data []byte) *Positions {
	pos := &Positions{lines: map[string]int{}, keys: map[int]string{}, explicit: map[string]bool{}}
	var p unstable.Parser
	p.Reset(data)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = keyParts(e.Key())
			pos.record(&p, table, e.Child())
			if e.Kind == unstable.Table {
				pos.define(&p, table, e.Child(), "table [%s] is defined twice")
			}
		case unstable.KeyValue:
			pos.keyValue(&p, table, e)
		}
	}
	return pos
}

// define notes an explicit definition of key and remembers the first duplicate.
func (pos *Positions) define(p *unstable.Parser, key []string, n *unstable.Node, format string) {
	raw := strings.Join(key, ".")
	if pos.explicit[raw] && pos.dup == nil {
		pos.dup = &Problem{Line: lineOf(p, n), Key: spell(key), Msg: fmt.Sprintf(format, spell(key))}
	}
	pos.explicit[raw] = true
}

func (pos *Positions) keyValue(p *unstable.Parser, prefix []string, kv *unstable.Node) {
	full := append(append([]string{}, prefix...), keyParts(kv.Key())...)
	first := kv.Key()
	first.Next()
	pos.record(p, full, first.Node())
	pos.define(p, full, first.Node(), "key %s is set twice")
	switch v := kv.Value(); v.Kind {
	case unstable.Array:
		it := v.Children()
		for i := 0; it.Next(); i++ {
			if l := lineOf(p, it.Node()); l > 0 {
				for _, k := range []string{strings.Join(full, "."), spell(full)} {
					pos.lines[fmt.Sprintf("%s[%d]", k, i)] = l
				}
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

func (pos *Positions) record(p *unstable.Parser, key []string, n *unstable.Node) {
	l := lineOf(p, n)
	if l == 0 {
		return
	}
	if _, ok := pos.keys[l]; !ok {
		pos.keys[l] = spell(key)
	}
	// Parents set implicitly by a dotted key or table header live here too.
	for i := len(key); i > 0; i-- {
		for _, k := range []string{strings.Join(key[:i], "."), spell(key[:i])} {
			if _, ok := pos.lines[k]; !ok {
				pos.lines[k] = l
			}
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

func keyParts(it unstable.Iterator) []string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}
