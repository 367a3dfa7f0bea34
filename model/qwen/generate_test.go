package qwen

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// fullLogits returns the full-forward logits [V] after the tokens of seq.
func fullLogits(t *testing.T, m *Model, seq []int) []float32 {
	t.Helper()
	ids := make([]int32, len(seq))
	mask := make([]int32, len(seq))
	for i, id := range seq {
		ids[i], mask[i] = int32(id), 1
	}
	all, err := m.Logits(ids, mask, 1, len(seq))
	if err != nil {
		t.Fatal(err)
	}
	v := m.Config.VocabSize
	return all[(len(seq)-1)*v:]
}

func maxAbsDiff(a, b []float32) (diff, scale float64) {
	for i := range a {
		diff = math.Max(diff, math.Abs(float64(a[i]-b[i])))
		scale = math.Max(scale, math.Abs(float64(b[i])))
	}
	return diff, scale
}

// TestCacheMatchesFullForward: at every step of a batched, left-padded,
// chunked generation, the KV-cache logits equal the full forward pass over
// the row's whole sequence.
func TestCacheMatchesFullForward(t *testing.T) {
	for _, tc := range []struct {
		name     string
		model    string
		maxChunk int
		capacity int
	}{
		{"qwen2 one chunk", "qwen2-tiny", 256, 64},
		{"qwen3 chunks of 3, growing cache", "qwen3-tiny", 3, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := loadGolden(t, tc.model)
			m := g.model
			prompts := [][]int{g.row(0), g.row(1), g.row(2)}
			s, err := m.NewSession(len(prompts), tc.capacity, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.MaxChunk = tc.maxChunk
			if err := s.Append(prompts); err != nil {
				t.Fatal(err)
			}
			seqs := make([][]int, len(prompts))
			for b := range prompts {
				seqs[b] = slices.Clone(prompts[b])
			}
			check := func(step int) {
				for b := range seqs {
					diff, scale := maxAbsDiff(s.NextLogits(b), fullLogits(t, m, seqs[b]))
					if diff > 1e-4*scale {
						t.Fatalf("step %d row %d: cache logits differ from full forward by %g (scale %g)", step, b, diff, scale)
					}
				}
			}
			check(0)
			for step := 1; step <= 6; step++ {
				res, err := s.Generate(GenerateOptions{MaxNewTokens: 1, Temperature: 1, EOS: []int{}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				for b := range seqs {
					seqs[b] = append(seqs[b], res[b].IDs...)
				}
				// Feed the pending token so NextLogits is after it.
				if err := s.Append(make([][]int, len(seqs))); err != nil {
					t.Fatal(err)
				}
				check(step)
			}
			if tc.capacity < 16 && s.slots <= tc.capacity {
				t.Errorf("cache did not grow: %d slots", s.slots)
			}
		})
	}
}

// TestGenerateLogProbsMatchScore: the log-probs returned while sampling
// equal teacher-forced scoring of the same sequences (1e-4).
func TestGenerateLogProbsMatchScore(t *testing.T) {
	for _, name := range goldenModels {
		t.Run(name, func(t *testing.T) {
			g := loadGolden(t, name)
			m := g.model
			prompts := [][]int{g.row(0), g.row(2)}
			res, err := m.Generate(prompts, GenerateOptions{MaxNewTokens: 8, Temperature: 1.3, TopK: 50, TopP: 0.95, EOS: []int{}}, 7)
			if err != nil {
				t.Fatal(err)
			}
			// Right-padded batch of prompt+response, response mask on the generated part.
			width := 0
			for b := range prompts {
				width = max(width, len(prompts[b])+len(res[b].IDs))
			}
			n := len(prompts) * width
			ids, mask, resp := make([]int32, n), make([]int32, n), make([]int32, n)
			for b := range prompts {
				seq := append(slices.Clone(prompts[b]), res[b].IDs...)
				for i, id := range seq {
					ids[b*width+i], mask[b*width+i] = int32(id), 1
					if i >= len(prompts[b]) {
						resp[b*width+i] = 1
					}
				}
			}
			logp, ent, err := m.Score(ids, mask, resp, len(prompts), width, ScoreOptions{Entropy: true})
			if err != nil {
				t.Fatal(err)
			}
			for b := range prompts {
				for i, want := range res[b].LogProbs {
					got := logp[b*width+len(prompts[b])+i]
					if math.Abs(float64(got-want)) > 1e-4 {
						t.Errorf("row %d token %d: score %g, generation %g", b, i, got, want)
					}
					e := ent[b*width+len(prompts[b])+i]
					if !(e > 0) || float64(e) > math.Log(float64(m.Config.VocabSize))+1e-4 {
						t.Errorf("row %d token %d: entropy %g outside (0, log V]", b, i, e)
					}
				}
				if logp[b*width] != 0 || ent[b*width] != 0 {
					t.Errorf("row %d: prompt position not masked: %g %g", b, logp[b*width], ent[b*width])
				}
			}
		})
	}
}

// TestContinuation: generating, appending external tokens, and generating
// again on the same cache equals generating on the concatenated prompt; an
// inactive row is left untouched.
func TestContinuation(t *testing.T) {
	g := loadGolden(t, "qwen3-tiny")
	m := g.model
	prompts := [][]int{g.row(1), g.row(2)}
	appended := [][]int{{5, 6, 7, 8, 9}, {300, 301}}
	greedy := GenerateOptions{MaxNewTokens: 4, EOS: []int{}}

	s := openSession(t, m, 16, prompts)
	first, err := s.Generate(greedy, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(appended); err != nil {
		t.Fatal(err)
	}
	second, err := s.Generate(greedy, []bool{true, false})
	if err != nil {
		t.Fatal(err)
	}
	if second[1].Finish != FinishIdle || len(second[1].IDs) != 0 {
		t.Errorf("inactive row generated %v", second[1])
	}

	concat := append(append(slices.Clone(prompts[0]), first[0].IDs...), appended[0]...)
	ref, err := m.Generate([][]int{concat}, greedy, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameTokens(t, "continuation", second[0], ref[0])
	if want := len(concat) + len(ref[0].IDs); s.Len(0) != want {
		t.Errorf("row 0 holds %d tokens, want %d", s.Len(0), want)
	}
}

// TestBatchMatchesSingle: greedy generation of a left-padded batch gives
// each row the same tokens as generating it alone.
func TestBatchMatchesSingle(t *testing.T) {
	g := loadGolden(t, "qwen2-tiny")
	m := g.model
	prompts := [][]int{g.row(0), g.row(1), g.row(2)}
	opts := GenerateOptions{MaxNewTokens: 6, EOS: []int{}}
	batch, err := m.Generate(prompts, opts, 0)
	if err != nil {
		t.Fatal(err)
	}
	for b, p := range prompts {
		one, err := m.Generate([][]int{p}, opts, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(batch[b].IDs, one[0].IDs) {
			t.Errorf("row %d: batch %v, alone %v", b, batch[b].IDs, one[0].IDs)
		}
	}
}

// TestStopConditions: EOS ids, stop strings (checked on decoded text) and
// the token limit end rows independently.
func TestStopConditions(t *testing.T) {
	g := loadGolden(t, "qwen2-tiny")
	m := g.model
	prompt := g.row(0)
	free, err := m.Generate([][]int{prompt}, GenerateOptions{MaxNewTokens: len(g.greedy), EOS: []int{}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref := free[0].IDs // = g.greedy
	decode := func(ids []int) string {
		var sb strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&sb, "<%d>", id)
		}
		return sb.String()
	}
	for _, tc := range []struct {
		name   string
		opts   GenerateOptions
		n      int
		finish FinishReason
	}{
		{"eos", GenerateOptions{MaxNewTokens: 10, EOS: []int{ref[3]}}, 4, FinishEOS},
		{"stop string", GenerateOptions{MaxNewTokens: 10, EOS: []int{}, Stop: []string{fmt.Sprintf("<%d><%d>", ref[4], ref[5])}, Decode: decode}, 6, FinishStop},
		{"length", GenerateOptions{MaxNewTokens: 2, EOS: []int{}}, 2, FinishLength},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var streamed []int
			tc.opts.OnToken = func(_, id int) { streamed = append(streamed, id) }
			res, err := m.Generate([][]int{prompt}, tc.opts, 0)
			if err != nil {
				t.Fatal(err)
			}
			r := res[0]
			if r.Finish != tc.finish || !slices.Equal(r.IDs, ref[:tc.n]) || !slices.Equal(streamed, r.IDs) {
				t.Errorf("got %v %v (streamed %v), want %v %v", r.Finish, r.IDs, streamed, tc.finish, ref[:tc.n])
			}
			if tc.finish == FinishStop && r.StopString == "" {
				t.Error("stop string not reported")
			}
		})
	}
	if _, err := m.Generate([][]int{prompt}, GenerateOptions{MaxNewTokens: 2, Stop: []string{"x"}}, 0); err == nil {
		t.Error("stop strings without Decode accepted")
	}
	if _, err := m.Generate([][]int{{m.Config.VocabSize}}, GenerateOptions{MaxNewTokens: 2}, 0); err == nil {
		t.Error("out-of-vocabulary prompt accepted")
	}
}

// TestSeededSampling: the same seed reproduces a sample, another seed
// (almost surely) does not.
func TestSeededSampling(t *testing.T) {
	g := loadGolden(t, "qwen3-tiny")
	opts := GenerateOptions{MaxNewTokens: 12, Temperature: 1.5, EOS: []int{}}
	run := func(seed uint64) []int {
		res, err := g.model.Generate([][]int{g.row(0)}, opts, seed)
		if err != nil {
			t.Fatal(err)
		}
		return res[0].IDs
	}
	a, b, c := run(1), run(1), run(2)
	if !slices.Equal(a, b) {
		t.Errorf("seed 1 gave %v then %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 1 and 2 both gave %v", a)
	}
}

// TestKeepRows: dropping finished rows from the batch leaves the kept rows'
// generation unchanged.
func TestKeepRows(t *testing.T) {
	g := loadGolden(t, "qwen3-tiny")
	m := g.model
	prompts := [][]int{g.row(0), g.row(1), g.row(2)}
	opts := GenerateOptions{MaxNewTokens: 3, EOS: []int{}}
	s := openSession(t, m, 32, prompts)
	first, err := s.Generate(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Keep([]int{2, 0}); err != nil {
		t.Fatal(err)
	}
	second, err := s.Generate(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range []int{2, 0} {
		ref, err := m.Generate([][]int{prompts[r]}, GenerateOptions{MaxNewTokens: 6, EOS: []int{}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := append(slices.Clone(first[r].IDs), second[i].IDs...)
		if !slices.Equal(got, ref[0].IDs) {
			t.Errorf("row %d after Keep: %v, alone %v", r, got, ref[0].IDs)
		}
	}
	if s.Batch() != 2 {
		t.Errorf("batch %d after Keep, want 2", s.Batch())
	}
	for _, bad := range [][]int{nil, {0, 0}, {5}} {
		if err := s.Keep(bad); err == nil {
			t.Errorf("Keep(%v) accepted", bad)
		}
	}
}

func TestSessionErrors(t *testing.T) {
	g := loadGolden(t, "qwen2-tiny")
	s, err := g.model.NewSession(2, 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"wrong row count", s.Append([][]int{{1}})},
		{"token outside vocabulary", s.Append([][]int{{1}, {-1}})},
		{"active flags", func() error { _, err := s.Generate(GenerateOptions{MaxNewTokens: 1}, []bool{true}); return err }()},
		{"zero max tokens", func() error { _, err := s.Generate(GenerateOptions{}, nil); return err }()},
		{"row without tokens", func() error { _, err := s.Generate(GenerateOptions{MaxNewTokens: 1}, nil); return err }()},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	s.Close()
	if err := s.Append([][]int{{1}, {2}}); err == nil {
		t.Error("append on a closed session succeeded")
	}
	if _, err := g.model.NewSession(0, 8, 0); err == nil {
		t.Error("empty batch accepted")
	}
}

// TestAppendNearCapacity appends a chunk whose padded width (a power of
// two) runs past the cache's end although its tokens fit: the padding past
// the end must be dropped, not written over earlier slots (as
// DynamicUpdateSlice, which clamps start, would).
func TestAppendNearCapacity(t *testing.T) {
	g := loadGolden(t, "qwen3-tiny")
	m := g.model
	ids := func(n, from int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 3 + (from+7*i)%200
		}
		return out
	}
	prompt, more := ids(45, 0), ids(17, 1) // 45 + 17 = 62 ≤ 64 slots; 45 + bucket(17) = 77 > 64
	greedy := GenerateOptions{MaxNewTokens: 3, EOS: []int{}}
	s := openSession(t, m, 64, [][]int{prompt})
	if err := s.Append([][]int{more}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Generate(greedy, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := m.Generate([][]int{append(slices.Clone(prompt), more...)}, greedy, 0)
	if err != nil {
		t.Fatal(err)
	}
	sameTokens(t, "after two appends", got[0], ref[0])
}

// sameTokens checks that a session's generation equals a reference one
// (from a single prompt): the same tokens, log-probs within 1e-4.
func sameTokens(t *testing.T, what string, got, ref Result) {
	t.Helper()
	if !slices.Equal(got.IDs, ref.IDs) {
		t.Fatalf("%s: %v, reference %v", what, got.IDs, ref.IDs)
	}
	for i := range ref.LogProbs {
		if d := math.Abs(float64(got.LogProbs[i] - ref.LogProbs[i])); d > 1e-4 {
			t.Errorf("%s: token %d: log-prob differs by %g", what, i, d)
		}
	}
}

// TestManyStepShapes runs more distinct step shapes (batch sizes) than
// GoMLX's default cache of 32 compiled graphs holds: an evaluation whose
// batches shrink row by row must not fail on its 33rd shape.
func TestManyStepShapes(t *testing.T) {
	g := loadGolden(t, "qwen3-tiny")
	opts := GenerateOptions{MaxNewTokens: 1, EOS: []int{}}
	for b := 1; b <= 34; b++ {
		prompts := make([][]int, b)
		for i := range prompts {
			prompts[i] = g.row(i % 2)
		}
		res, err := g.model.Generate(prompts, opts, 0)
		if err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		if len(res) != b || len(res[b-1].IDs) != 1 {
			t.Fatalf("batch %d: %d results", b, len(res))
		}
	}
}

// openSession opens a decode session of m for len(prompts) rows of
// capacity slots (closed when the test ends) and appends prompts.
func openSession(t *testing.T, m *Model, capacity int, prompts [][]int) *Session {
	t.Helper()
	s, err := m.NewSession(len(prompts), capacity, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Append(prompts); err != nil {
		t.Fatal(err)
	}
	return s
}
