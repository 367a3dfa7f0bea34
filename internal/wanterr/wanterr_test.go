package wanterr

import (
	"errors"
	"strings"
	"testing"
)

// recorder counts the errors Check reports.
type recorder struct {
	testing.TB
	errs int
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.errs++ }

// TestCheck: Check (one wanted part) and CheckAll (several) on the same
// table; a case with at most one part runs through both.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		err   error
		wants []string
		done  bool
		errs  int // errors reported
	}{
		{nil, nil, false, 0},
		{errors.New("boom"), nil, false, 0},
		{errors.New("line 3: boom"), []string{"boom"}, true, 0},
		{errors.New("other"), []string{"boom"}, true, 1},
		{nil, []string{"boom"}, true, 1},
		{errors.New("line 3: boom"), []string{"line 3", "boom"}, true, 0},
		{errors.New("line 3: boom"), []string{"line 4", "boom", "bang"}, true, 2},
		{nil, []string{"boom", "bang"}, true, 1},
	} {
		r := &recorder{TB: t}
		if done := CheckAll(r, "case", tc.err, tc.wants); done != tc.done || r.errs != tc.errs {
			t.Errorf("CheckAll(%v, %q) = %v with %d errors, want %v with %d", tc.err, tc.wants, done, r.errs, tc.done, tc.errs)
		}
		if len(tc.wants) > 1 {
			continue
		}
		want := strings.Join(tc.wants, "")
		r = &recorder{TB: t}
		if done := Check(r, "case", tc.err, want); done != tc.done || r.errs != tc.errs {
			t.Errorf("Check(%v, %q) = %v with %d errors, want %v with %d", tc.err, want, done, r.errs, tc.done, tc.errs)
		}
	}
}
