// Package wanterr checks the error of a table-driven test case, the one
// form of "this case wants an error containing X" in the tests.
package wanterr

import (
	"strings"
	"testing"
)

// Check handles a case that wants an error: with want non-empty it
// reports an error on tb unless err contains want, and returns true (the
// case is done); with want empty it returns false and leaves err to the
// caller.
func Check(tb testing.TB, name string, err error, want string) bool {
	tb.Helper()
	if want == "" {
		return false
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		tb.Errorf("%s: error %v, want one containing %q", name, err, want)
	}
	return true
}

// CheckAll is Check for a case that wants an error containing every one of
// wants: with wants empty it returns false and leaves err to the caller;
// otherwise it reports a nil error or each missing part, and returns true.
func CheckAll(tb testing.TB, name string, err error, wants []string) bool {
	tb.Helper()
	if len(wants) == 0 {
		return false
	}
	if err == nil {
		tb.Errorf("%s: no error, want one containing %q", name, wants)
		return true
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			tb.Errorf("%s: error %v, want one containing %q", name, err, w)
		}
	}
	return true
}
