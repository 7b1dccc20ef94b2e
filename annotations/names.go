package annotations

import "strings"

// Name checks, written out rather than as regular expressions: the shim
// runs once per container, and compiling bounded repetitions at start-up
// cost it more than a millisecond.

func isLower(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

func isAlnum(c byte) bool { return isLower(c) || c >= 'A' && c <= 'Z' }

// IsLabel reports whether s is a lowercase DNS label: a-z, 0-9 and '-',
// 1 to 63 characters, starting and ending with a letter or digit.
func IsLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || !isLower(s[0]) || !isLower(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isLower(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// IsZygoteName reports whether s can name a zygote or a peer: a DNS
// label, or a label qualified by a namespace's, "name.namespace".
func IsZygoteName(s string) bool {
	name, ns, qualified := strings.Cut(s, ".")
	return IsLabel(name) && (!qualified || IsLabel(ns))
}

// IsLabelPattern reports whether s is a label prefix followed by '*'
// ("team-*"): 1 to 62 characters of a-z, 0-9 and '-', the first a letter
// or digit, then the star.
func IsLabelPattern(s string) bool {
	if len(s) < 2 || len(s) > 63 || s[len(s)-1] != '*' || !isLower(s[0]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if !isLower(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// IsDeviceName reports whether s can name an RDMA device: 1 to 64
// characters of A-Z, a-z, 0-9, '_', '.' and '-'.
func IsDeviceName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// IsHostName reports whether s is a host name: 1 to 253 characters of
// letters, digits, '-' and '.', starting and ending with a letter or digit.
func IsHostName(s string) bool {
	if len(s) == 0 || len(s) > 253 || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
