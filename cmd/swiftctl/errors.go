package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/spf13/cobra"
)

// Exit codes (documented in rootLong).
const (
	exitOK           = 0
	exitFailure      = 1
	exitUsage        = 2
	exitInvalid      = 3
	exitPrecondition = 4
	exitNotFound     = 5
	exitDataLoss     = 6
	exitUnavailable  = 7
	exitPermission   = 8
)

// errorClass is an errdefs class: its name (the text errdefs' sentinel
// error prints) and the exit code it maps to.
type errorClass struct {
	name     string
	sentinel error
	is       func(error) bool
	code     int
}

// classes in the order an error is classified: the first that matches
// wins. Classes without an exit code of their own exit 1.
var classes = []errorClass{
	{"data loss", errdefs.ErrDataLoss, errdefs.IsDataLoss, exitDataLoss},
	{"failed precondition", errdefs.ErrFailedPrecondition, errdefs.IsFailedPrecondition, exitPrecondition},
	{"not found", errdefs.ErrNotFound, func(err error) bool {
		return errdefs.IsNotFound(err) || errors.Is(err, fs.ErrNotExist)
	}, exitNotFound},
	{"permission denied", errdefs.ErrPermissionDenied, func(err error) bool {
		return errdefs.IsPermissionDenied(err) || errors.Is(err, fs.ErrPermission)
	}, exitPermission},
	{"unavailable", errdefs.ErrUnavailable, errdefs.IsUnavailable, exitUnavailable},
	{"invalid argument", errdefs.ErrInvalidArgument, errdefs.IsInvalidArgument, exitInvalid},
	{"already exists", errdefs.ErrAlreadyExists, errdefs.IsAlreadyExists, exitFailure},
	{"resource exhausted", errdefs.ErrResourceExhausted, errdefs.IsResourceExhausted, exitFailure},
	{"conflict", errdefs.ErrConflict, errdefs.IsConflict, exitFailure},
	{"not modified", errdefs.ErrNotModified, errdefs.IsNotModified, exitFailure},
	{"aborted", errdefs.ErrAborted, errdefs.IsAborted, exitFailure},
	{"out of range", errdefs.ErrOutOfRange, errdefs.IsOutOfRange, exitFailure},
	{"not implemented", errdefs.ErrNotImplemented, errdefs.IsNotImplemented, exitFailure},
	{"internal", errdefs.ErrInternal, errdefs.IsInternal, exitFailure},
	{"unauthorized", errdefs.ErrUnauthenticated, errdefs.IsUnauthorized, exitFailure},
	{"unknown", errdefs.ErrUnknown, errdefs.IsUnknown, exitFailure},
}

// usageError is a command line swiftctl cannot run: an unknown command or
// flag, a bad flag value, wrong arguments. It exits 2 and is an
// InvalidArgument error (errdefs.IsInvalidArgument).
type usageError struct{ err error }

func (e *usageError) Error() string   { return e.err.Error() }
func (e *usageError) Unwrap() []error { return []error{e.err, errdefs.ErrInvalidArgument} }

// usagef returns a usageError with a message.
func usagef(format string, a ...any) error {
	return &usageError{fmt.Errorf(format, a...)}
}

// asUsage makes err a usageError (nil stays nil).
func asUsage(err error) error {
	var ue *usageError
	if err == nil || errors.As(err, &ue) {
		return err
	}
	return &usageError{err}
}

// checkFailed is a check whose verdict the command has printed already
// (doctor with a FAIL, cache check of a cache that is not valid): it exits
// 1, and with -o json nothing is added to the verdict.
type checkFailed struct{ err error }

func (e *checkFailed) Error() string { return e.err.Error() }
func (e *checkFailed) Unwrap() error { return e.err }

// classify returns the exit code of err and its errdefs class ("" for
// none).
func classify(err error) (code int, class string) {
	var ue *usageError
	if errors.As(err, &ue) {
		return exitUsage, "invalid argument"
	}
	var cf *checkFailed
	if errors.As(err, &cf) {
		return exitFailure, ""
	}
	for _, c := range classes {
		if c.is(err) {
			return c.code, c.name
		}
	}
	return exitFailure, ""
}

// message is err as a sentence for a person: without the class suffixes
// that wrapping an errdefs sentinel adds ("...: failed precondition"),
// the class being the exit code (and "class" in JSON) instead.
func message(err error) string {
	msg := err.Error()
	walkErrors(err, func(e error) {
		for _, child := range unwrapAll(e) {
			name, ok := sentinelName(child)
			if !ok {
				continue
			}
			text := e.Error()
			if trimmed, ok := strings.CutSuffix(text, ": "+name); ok && trimmed != "" {
				msg = strings.Replace(msg, text, trimmed, 1)
			} else if trimmed, ok := strings.CutPrefix(text, name+": "); ok && trimmed != "" {
				msg = strings.Replace(msg, text, trimmed, 1)
			}
		}
	})
	// a class embedded as text (fmt.Errorf("...: %v", err)) is in no
	// chain: drop the names no system error prints
	for _, c := range classes {
		switch c.name {
		case "invalid argument", "permission denied", "not found", "unknown":
			continue // also the words of errno and other messages
		}
		msg = dropClassText(msg, c.name)
	}
	return msg
}

// dropClassText removes ": "+name where a clause ends after it.
func dropClassText(msg, name string) string {
	for from := 0; ; {
		i := strings.Index(msg[from:], ": "+name)
		if i < 0 {
			return msg
		}
		i += from
		end := i + len(": "+name)
		if end == len(msg) || strings.ContainsRune(":;,)\n", rune(msg[end])) {
			msg = msg[:i] + msg[end:]
			from = i
		} else {
			from = end
		}
	}
}

// sentinelName tells whether err is one of errdefs' sentinels, and its text.
func sentinelName(err error) (string, bool) {
	for _, c := range classes {
		if err == c.sentinel {
			return c.name, true
		}
	}
	return "", false
}

func unwrapAll(err error) []error {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			return []error{e}
		}
	case interface{ Unwrap() []error }:
		return u.Unwrap()
	}
	return nil
}

// walkErrors calls f on err and every error it wraps, outermost first.
func walkErrors(err error, f func(error)) {
	if err == nil {
		return
	}
	f(err)
	for _, e := range unwrapAll(err) {
		walkErrors(e, f)
	}
}

// jsonError is a failure printed with -o json.
type jsonError struct {
	Error    string  `json:"error"`
	Class    *string `json:"class"`
	ExitCode int     `json:"exit_code"`
	// Problems are a malformed tenant policy's, one per line of the text output.
	Problems []policyProblem `json:"problems,omitempty"`
}

// report prints err for cmd (to stderr; to stdout as JSON with -o json)
// and returns its exit code.
func report(cmd *cobra.Command, err error, stdout, stderr io.Writer) int {
	code, class := classify(err)
	msg := message(err)
	if outputOf(cmd) == outputJSON {
		var cf *checkFailed
		if errors.As(err, &cf) {
			return code // the verdict is the JSON printed
		}
		je := jsonError{Error: msg, ExitCode: code}
		if class != "" {
			je.Class = &class
		}
		var pe *policyProblems
		if errors.As(err, &pe) {
			je.Problems = pe.problems
		}
		if werr := writeJSON(stdout, je); werr != nil {
			fmt.Fprintf(stderr, "swiftctl: %s\n", msg)
		}
		return code
	}
	fmt.Fprintf(stderr, "swiftctl: %s\n", msg)
	if code == exitUsage && cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}
