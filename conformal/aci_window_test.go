package conformal

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestACIWindowUnits: the paper's window holds the scores of the last
// Window iterations (max(1, t−W) … t−1, the bootstrap as iteration 0), the
// code's the last Window scores, which one large step replaces whole. Both
// round-trip through the saved state and continue bit for bit.
func TestACIWindowUnits(t *testing.T) {
	boot := []float64{9, 9, 9}
	steps := [][]float64{{1, 2, 3, 4, 5}, {6}, {7, 8}}
	for _, tc := range []struct {
		name   string
		unit   ACIWindow
		window int
		want   [][]float64 // the window after each step, oldest first
	}{
		{"iterations W=2", WindowIterations, 2, [][]float64{{9, 9, 9, 1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 6}, {6, 7, 8}}},
		{"iterations W=1", WindowIterations, 1, [][]float64{{1, 2, 3, 4, 5}, {6}, {7, 8}}},
		{"iterations W=10 keeps the bootstrap", WindowIterations, 10, [][]float64{{9, 9, 9, 1, 2, 3, 4, 5}, {9, 9, 9, 1, 2, 3, 4, 5, 6}, {9, 9, 9, 1, 2, 3, 4, 5, 6, 7, 8}}},
		{"scores W=4: a large step replaces it whole", WindowScores, 4, [][]float64{{2, 3, 4, 5}, {3, 4, 5, 6}, {5, 6, 7, 8}}},
		{"scores W=10", WindowScores, 10, [][]float64{{9, 9, 9, 1, 2, 3, 4, 5}, {9, 9, 9, 1, 2, 3, 4, 5, 6}, {9, 9, 1, 2, 3, 4, 5, 6, 7, 8}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultACIConfig()
			cfg.Window, cfg.WindowUnit = tc.window, tc.unit
			a, err := NewACI(cfg, boot)
			if err != nil {
				t.Fatal(err)
			}
			for i, b := range steps {
				before := a.Window()
				wantQ := Quantile(before, 1-a.Alpha(), cfg.Quantile)
				st, err := a.Step(b)
				if err != nil {
					t.Fatal(err)
				}
				if st.QHat != wantQ {
					t.Errorf("step %d: q_t %v, want the quantile of the window before the step, %v", i+1, st.QHat, wantQ)
				}
				if got := a.Window(); !slices.Equal(got, tc.want[i]) {
					t.Errorf("step %d: window %v, want %v", i+1, got, tc.want[i])
				}
				// Save, restore, and continue identically.
				state, err := json.Marshal(a)
				if err != nil {
					t.Fatal(err)
				}
				var r ACI
				if err := json.Unmarshal(state, &r); err != nil {
					t.Fatalf("restore %s: %v", state, err)
				}
				if !slices.Equal(r.Window(), a.Window()) || r.Config() != a.Config() {
					t.Fatalf("restored window %v config %+v, want %v %+v", r.Window(), r.Config(), a.Window(), a.Config())
				}
				next := []float64{0.5, 9.5}
				c := *a
				c.batches = slices.Clone(a.batches)
				c.window = slices.Clone(a.window)
				s1, _ := c.Step(next)
				s2, _ := r.Step(next)
				if s1.QHat != s2.QHat || s1.AlphaNext != s2.AlphaNext || !slices.Equal(c.Window(), r.Window()) {
					t.Fatalf("restored controller diverges: %+v vs %+v", s2, s1)
				}
			}
		})
	}
	// A state saved before the window unit existed resumes as it ran: a
	// window of scores.
	var old ACI
	if err := json.Unmarshal([]byte(`{"config":{"rho":0.25,"gamma":0.005,"eta":0.5,"window":3,"rule":"smoothed","quantile":"conformal","decay":0.95,"alpha1":0.25},"t":1,"alpha":0.25,"window":[1,2,3]}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.Config().WindowUnit != WindowScores || !slices.Equal(old.Window(), []float64{1, 2, 3}) {
		t.Errorf("old state: %+v window %v", old.Config(), old.Window())
	}
	for _, bad := range []string{
		`{"config":{"rho":0.25,"gamma":0.005,"eta":0.5,"window":1,"window_unit":"iterations","decay":0.95},"window_batches":[[1],[2]]}`,
		`{"config":{"rho":0.25,"gamma":0.005,"eta":0.5,"window":3,"window_unit":"iterations","decay":0.95},"window":[1]}`,
		`{"config":{"rho":0.25,"gamma":0.005,"eta":0.5,"window":3,"window_unit":"scores","decay":0.95},"window_batches":[[1]]}`,
		`{"config":{"rho":0.25,"gamma":0.005,"eta":0.5,"window":3,"window_unit":"steps","decay":0.95}}`,
	} {
		var a ACI
		if err := json.Unmarshal([]byte(bad), &a); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
