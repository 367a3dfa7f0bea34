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
