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
	for _, tc := range []struct {
		err        error
		want       string
		done       bool
		reportsErr bool
	}{
		{nil, "", false, false},
		{errors.New("boom"), "", false, false},
		{errors.New("line 3: boom"), "boom", true, false},
		{errors.New("other"), "boom", true, true},
		{nil, "boom", true, true},
	} {
		r := &recorder{TB: t}
		if done := Check(r, "case", tc.err, tc.want); done != tc.done || (r.errs > 0) != tc.reportsErr {
			t.Errorf("Check(%v, %q) = %v with %d errors", tc.err, tc.want, done, r.errs)
		}
	}
}
