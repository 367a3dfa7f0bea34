package bench

import (
	"slices"
	"testing"
	"time"
)

// TestDefault: zero and negative options take the default, set ones stay;
// an empty list takes the default list, a given one stays.
func TestDefault(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{0, 8}, {-3, 8}, {1, 1}, {12, 12}} {
		v := tc.in
		Default(&v, 8)
		if v != tc.want {
			t.Errorf("Default(%d, 8) = %d, want %d", tc.in, v, tc.want)
		}
	}
	d := -time.Second
	Default(&d, time.Second)
	f := 0.5
	Default(&f, 2)
	if d != time.Second || f != 0.5 {
		t.Errorf("Default: duration %v, float %v", d, f)
	}
	var l []int
	DefaultList(&l, []int{1, 64})
	g := []int{3}
	DefaultList(&g, []int{1, 64})
	if !slices.Equal(l, []int{1, 64}) || !slices.Equal(g, []int{3}) {
		t.Errorf("DefaultList: %v, %v", l, g)
	}
}
