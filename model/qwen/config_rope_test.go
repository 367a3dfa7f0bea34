package qwen

import (
	"strings"
	"testing"
)

// TestRopeParameters: transformers ≥ 5 saves rope_parameters instead of
// rope_theta; its theta is used, other rope types and disagreeing thetas
// are errors.
func TestRopeParameters(t *testing.T) {
	for _, tc := range []struct {
		name, add, wantErr string
		theta              float64
	}{
		{"v5 default", `"rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"}`, "", 1e6},
		{"v5 without type", `"rope_parameters":{"rope_theta":500000}`, "", 5e5},
		{"both agree", `"rope_theta":1e6,"rope_parameters":{"rope_theta":1e6,"rope_type":"default"}`, "", 1e6},
		{"null", `"rope_parameters":null`, "", 10000},
		{"yarn", `"rope_parameters":{"rope_theta":1e6,"rope_type":"yarn","factor":4}`, "rope_type", 0},
		{"disagree", `"rope_theta":1e4,"rope_parameters":{"rope_theta":1e6}`, "disagrees", 0},
		{"not an object", `"rope_parameters":[1]`, "rope_parameters", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := parseCase(t, strings.Replace(minimalQwen2, `}`, ","+tc.add+"}", 1), tc.wantErr)
			if !ok {
				return
			}
			if c.RopeTheta != tc.theta {
				t.Fatalf("rope_theta %g, want %g", c.RopeTheta, tc.theta)
			}
		})
	}
}
