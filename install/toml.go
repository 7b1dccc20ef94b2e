package install

import (
	"strings"

	"github.com/swift-rdma/swift-containerd/config/tomlfile"
)

// quoteList renders ss as a one-line TOML array of basic strings.
func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlfile.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// entry is one top-level key/value of a TOML document: src[Start:End] is
// the whole entry, from the start of its line to just after the newline that
// ends its value (multi-line arrays included).
type entry struct {
	Key        string
	Start, End int
}

// topLevel lists the key/value entries that come before the first table
// header of src, and the offset where that header's line starts (len(src)
// when there is none). It understands just enough TOML to find entries:
// strings of all four kinds, comments, and nested brackets and braces.
func topLevel(src []byte) ([]entry, int) {
	var out []entry
	i := 0
	for i < len(src) {
		lineStart := i
		for i < len(src) && (src[i] == ' ' || src[i] == '\t') {
			i++
		}
		if i >= len(src) {
			break
		}
		switch src[i] {
		case '\n', '\r', '#':
			i = lineEnd(src, i)
			continue
		case '[':
			return out, lineStart
		}
		// a key, possibly quoted or dotted, up to '='
		keyStart := i
		for i < len(src) && src[i] != '=' && src[i] != '\n' {
			if src[i] == '"' || src[i] == '\'' {
				i = skipString(src, i)
				continue
			}
			i++
		}
		key := strings.TrimSpace(string(src[keyStart:i]))
		if i >= len(src) || src[i] != '=' {
			// not a key/value line (malformed); the TOML parser has
			// already accepted the file, so just move on
			i = lineEnd(src, i)
			continue
		}
		i = valueEnd(src, i+1)
		out = append(out, entry{Key: unquoteKey(key), Start: lineStart, End: i})
	}
	return out, len(src)
}

// lineEnd returns the offset just after the newline at or after i.
func lineEnd(src []byte, i int) int {
	for i < len(src) && src[i] != '\n' {
		i++
	}
	if i < len(src) {
		i++
	}
	return i
}

// valueEnd scans a value starting at i and returns the offset just after the
// newline that ends it (at bracket depth 0, outside strings).
func valueEnd(src []byte, i int) int {
	depth := 0
	for i < len(src) {
		switch c := src[i]; c {
		case '"', '\'':
			i = skipString(src, i)
			continue
		case '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		case '[', '{':
			depth++
		case ']', '}':
			if depth > 0 {
				depth--
			}
		case '\n':
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return i
}

// skipString returns the offset just after the string that starts at i
// (basic, literal, or their multi-line forms).
func skipString(src []byte, i int) int {
	q := src[i]
	if i+2 < len(src) && src[i+1] == q && src[i+2] == q {
		end := strings.Index(string(src[i+3:]), strings.Repeat(string(q), 3))
		if end < 0 {
			return len(src)
		}
		j := i + 3 + end + 3
		for j < len(src) && src[j] == q { // """a"""" ends with a quote in the content
			j++
		}
		return j
	}
	j := i + 1
	for j < len(src) && src[j] != q && src[j] != '\n' {
		if q == '"' && src[j] == '\\' {
			j++
		}
		j++
	}
	if j < len(src) && src[j] == q {
		j++
	}
	return j
}

func unquoteKey(k string) string {
	if len(k) >= 2 && (k[0] == '"' || k[0] == '\'') && k[len(k)-1] == k[0] {
		return k[1 : len(k)-1]
	}
	return k
}

// find returns the entry called key.
func find(entries []entry, key string) (entry, bool) {
	for _, e := range entries {
		if e.Key == key {
			return e, true
		}
	}
	return entry{}, false
}
