package bench

import "time"

// Default sets an unset option *v (zero or negative) to def: the defaults
// of the benchmarks' option structs.
func Default[T int | int64 | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// DefaultList sets an empty list option *v to def.
func DefaultList[S ~[]E, E any](v *S, def S) {
	if len(*v) == 0 {
		*v = def
	}
}
