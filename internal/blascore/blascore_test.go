package blascore

import "testing"

func TestParseAndGeneric(t *testing.T) {
	for _, tc := range []struct {
		out, core string
		generic   bool
	}{
		{"Core: Prescott\n", "Prescott", true},
		{"Unknown CPU model - please report it\nCore: Nehalem\n", "Nehalem", true},
		{"Core: SkylakeX\n", "SkylakeX", false},
		{"Core: Haswell\n", "Haswell", false},
		{"", "", false},
	} {
		if got := Parse(tc.out); got != tc.core || Generic(got) != tc.generic {
			t.Errorf("Parse(%q) = %q (generic %v), want %q (%v)", tc.out, got, Generic(got), tc.core, tc.generic)
		}
	}
}

func TestDescribeRoundTrip(t *testing.T) {
	blas := "openblas-pthread/libopenblasp-r0.3.21.so"
	note := blas + Marker + "Prescott (pre-AVX kernels: OpenBLAS does not recognise this CPU)"
	if got := GenericIn(note); got != "Prescott" {
		t.Fatalf("GenericIn = %q", got)
	}
	if got := GenericIn(blas); got != "" {
		t.Fatalf("GenericIn(plain) = %q", got)
	}
	// A python that does not exist leaves the description as it was.
	s := Prepare("/nonexistent/python3", Features{AVX512: true, AVX2: true})
	if got := s.Describe(blas); got != blas || s.Env() != nil {
		t.Fatalf("Describe = %q, Env %v", got, s.Env())
	}
}
