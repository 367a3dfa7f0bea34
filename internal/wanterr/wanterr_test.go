package wanterr

import (
	"errors"
	"testing"
)

// recorder counts the errors Check reports.
type recorder struct {
	testing.TB
	errs int
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.errs++ }

func TestCheck(t *testing.T) {
	type outcome struct{ done, reportsErr bool }
	for _, tc := range []struct {
		err  error
		want string
		outcome
	}{
		{nil, "", outcome{false, false}},
		{errors.New("boom"), "", outcome{false, false}},
		{errors.New("line 3: boom"), "boom", outcome{true, false}},
		{errors.New("other"), "boom", outcome{true, true}},
		{nil, "boom", outcome{true, true}},
	} {
		r := &recorder{TB: t}
		if done := Check(r, "case", tc.err, tc.want); done != tc.done || (r.errs > 0) != tc.reportsErr {
			t.Errorf("Check(%v, %q) = %v with %d errors", tc.err, tc.want, done, r.errs)
		}
	}
}

func TestCheckAll(t *testing.T) {
	for _, tc := range []struct {
		err   error
		wants []string
		done  bool
		errs  int
	}{
		{nil, nil, false, 0},
		{errors.New("boom"), nil, false, 0},
		{errors.New("line 3: boom"), []string{"line 3", "boom"}, true, 0},
		{errors.New("line 3: boom"), []string{"line 4", "boom", "bang"}, true, 2},
		{nil, []string{"boom", "bang"}, true, 1},
	} {
		r := &recorder{TB: t}
		if done := CheckAll(r, "case", tc.err, tc.wants); done != tc.done || r.errs != tc.errs {
			t.Errorf("CheckAll(%v, %q) = %v with %d errors, want %v with %d", tc.err, tc.wants, done, r.errs, tc.done, tc.errs)
		}
	}
}
