package config

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
)

// Size suffixes, as Kubernetes quantities spell them: binary Ki, Mi, Gi,
// Ti, Pi, Ei (powers of 1024), decimal k, M, G, T, P, E (powers of 1000).
// The IEC spellings KiB, MiB, ... are binary too; B is bytes.
var sizeUnits = map[string]uint64{
	"": 1, "B": 1,
	"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50, "EiB": 1 << 60,
	"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
}

// ambiguousPrefix maps the letter of a suffix that is no quantity suffix
// but reads as one (1g, 64m, 512MB, 4K, 1gi, 2kib) to its binary and
// decimal spellings: the reader cannot tell which was meant (Kubernetes
// reads "m" as milli, Docker "MB" as MiB), so the size is refused with both.
var ambiguousPrefix = map[byte][2]string{
	'k': {"Ki", "k"}, 'm': {"Mi", "M"}, 'g': {"Gi", "G"}, 't': {"Ti", "T"}, 'p': {"Pi", "P"}, 'e': {"Ei", "E"},
}

// ParseSize parses a size in bytes written as a Kubernetes quantity: a
// plain integer is bytes; Ki, Mi, Gi, Ti, Pi, Ei (and KiB, MiB, ...) are
// powers of 1024; k, M, G, T, P, E powers of 1000; a decimal fraction is
// allowed when the result is whole bytes (1.5Gi). Spellings that could
// mean either (1g, 64m, 4K, 512MB) are refused with a message naming the
// two to choose from. Errors are InvalidArgument and quote s.
func ParseSize(s string) (uint64, error) {
	n, msg := parseSize(s)
	if msg != "" {
		return 0, fmt.Errorf("%q: %s: %w", s, msg, errdefs.ErrInvalidArgument)
	}
	return n, nil
}

func parseSize(s string) (uint64, string) {
	const want = `not a size: write bytes (65536) or a Kubernetes quantity such as 64Ki, 1Gi (powers of 1024) or 64M, 1G (powers of 1000)`
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.') {
		end++
	}
	num, suffix := s[:end], strings.TrimLeft(s[end:], " ")
	whole, frac, dotted := strings.Cut(num, ".")
	spaces := len(s[end:]) - len(suffix)
	if whole == "" || dotted && frac == "" || strings.Contains(frac, ".") || spaces > 1 || spaces == 1 && suffix == "" {
		return 0, want
	}
	mult, ok := sizeUnits[suffix]
	if !ok {
		if alt, amb := ambiguous(suffix); amb {
			return 0, fmt.Sprintf("ambiguous size; write %s%s (%s bytes) or %s%s (%s bytes)",
				num, alt[0], bytesText(whole, frac, sizeUnits[alt[0]]), num, alt[1], bytesText(whole, frac, sizeUnits[alt[1]]))
		}
		return 0, want
	}
	n, msg := scale(whole, frac, mult)
	if msg != "" {
		return 0, msg
	}
	return n, ""
}

// ambiguous tells whether suffix reads as a size unit without being one:
// a letter of k, m, g, t, p, e in either case, then nothing, "i", "b" or
// "ib" in either case.
func ambiguous(suffix string) ([2]string, bool) {
	if suffix == "" {
		return [2]string{}, false
	}
	alt, ok := ambiguousPrefix[suffix[0]|0x20]
	switch strings.ToLower(suffix[1:]) {
	case "", "i", "b", "ib":
		return alt, ok
	}
	return alt, false
}

// scale computes whole.frac × mult exactly; the message says why it cannot.
func scale(whole, frac string, mult uint64) (uint64, string) {
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil {
		return 0, "overflows 64 bits"
	}
	hi, n := bits.Mul64(w, mult)
	if hi != 0 {
		return 0, "overflows 64 bits"
	}
	frac = strings.TrimRight(frac, "0")
	if frac == "" {
		return n, ""
	}
	if len(frac) > 18 {
		return 0, "not a whole number of bytes"
	}
	f, _ := strconv.ParseUint(frac, 10, 64)
	den := uint64(math.Pow10(len(frac)))
	fh, fl := bits.Mul64(f, mult)
	if fh >= den { // cannot happen for f < den, kept for safety
		return 0, "overflows 64 bits"
	}
	q, r := bits.Div64(fh, fl, den)
	if r != 0 {
		return 0, "not a whole number of bytes"
	}
	sum, carry := bits.Add64(n, q, 0)
	if carry != 0 {
		return 0, "overflows 64 bits"
	}
	return sum, ""
}

// bytesText is whole.frac × mult as a decimal, or "whole.frac × mult" when
// that is not a whole number of bytes.
func bytesText(whole, frac string, mult uint64) string {
	if n, msg := scale(whole, frac, mult); msg == "" {
		return strconv.FormatUint(n, 10)
	}
	num := whole
	if frac != "" {
		num += "." + frac
	}
	return num + " × " + strconv.FormatUint(mult, 10)
}

// ParseMemlock parses an RLIMIT_MEMLOCK: "unlimited" (or -1), or a size
// (ParseSize) of at least 64Ki.
func ParseMemlock(s string) (uint64, error) {
	if s == "unlimited" || s == "-1" {
		return MemlockUnlimited, nil
	}
	n, err := ParseSize(s)
	if err != nil {
		return 0, err
	}
	if n < 64<<10 {
		return 0, fmt.Errorf("%q is below 64KiB, too small for any RDMA registration: %w", s, errdefs.ErrInvalidArgument)
	}
	return n, nil
}
