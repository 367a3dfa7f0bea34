package agent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cas-engine/cas/model/qwen"
)

// observe appends an observation to a row and returns the appended tokens
// and whether they were cut. An observation longer than MaxObsTokens keeps
// its first tokens; an information block keeps its closing tail
// ("</information>", plus "\n\n" in Search-R1's format) after the cut, so
// that truncation alone never breaks the grammar of Eq. 5 — unless
// ObsCutBlind asks for Search-R1's plain cut. What exceeds the row's
// remaining budget is dropped (the trajectory then ends).
func (r *Runner) observe(w *row, text, kind string) ([]int, bool) {
	ids, cut := cutObservation(r.tok, r.cfg, text, kind)
	if room := max(w.budget-w.respLen(), 0); len(ids) > room {
		ids, cut = ids[:room], true
	}
	start := len(w.t.IDs)
	w.append(ids, nil)
	if len(ids) > 0 {
		w.t.Observations = append(w.t.Observations, Span{Start: start, End: start + len(ids), Kind: kind})
	}
	return ids, cut
}

// cutObservation encodes an observation and cuts it to MaxObsTokens: the
// first tokens of the text (ObsCutBlind, or any observation but an
// information block ending in its tail), or the first tokens of the block's
// body followed by the encoded tail. It never returns a token that is not
// part of the encoded text (a block 1–3 tokens over the limit used to be
// padded past the body's end), and reports whether anything was dropped.
func cutObservation(tok Tokenizer, cfg RolloutConfig, text, kind string) ([]int, bool) {
	ids := tok.Encode(text)
	limit := cfg.MaxObsTokens
	if len(ids) <= limit {
		return ids, false
	}
	tail := infoTail(cfg.Info)
	if kind != ObsInformation || cfg.ObsCutBlind || !strings.HasSuffix(text, tail) {
		return ids[:limit], true
	}
	tailIDs := tok.Encode(tail)
	if len(tailIDs) >= limit {
		return ids[:limit], true
	}
	body := tok.Encode(strings.TrimSuffix(text, tail))
	keep := min(len(body), limit-len(tailIDs))
	out := make([]int, 0, keep+len(tailIDs))
	return append(append(out, body[:keep]...), tailIDs...), keep < len(body)
}

// infoTail is what follows the last passage of an information block.
func infoTail(f InfoFormat) string {
	if f == InfoSearchR1 {
		return InformationClose + "\n\n"
	}
	return InformationClose
}

// generate runs one generation for every running row. Rows whose remaining
// budget is below MaxTurnTokens get a call of their own with that smaller
// limit, so no row ever exceeds its budget.
func (r *Runner) generate(sess *session, running []*row) ([]qwen.Result, error) {
	caps := map[int][]int{} // token limit → indices into running
	for i, w := range running {
		c := min(r.cfg.MaxTurnTokens, w.budget-w.respLen())
		caps[c] = append(caps[c], i)
	}
	keys := make([]int, 0, len(caps))
	for c := range caps {
		keys = append(keys, c)
	}
	slices.Sort(keys)
	stop := []string{SearchClose, AnswerClose}
	if r.cfg.Mode != ModeAgent {
		stop = []string{AnswerClose}
	}
	out := make([]qwen.Result, len(running))
	for _, c := range keys {
		active := make([]bool, sess.batch)
		for _, i := range caps[c] {
			active[running[i].slot] = true
		}
		res, err := sess.s.Generate(qwen.GenerateOptions{
			MaxNewTokens: c,
			Temperature:  r.cfg.Temperature,
			TopK:         r.cfg.SampleTopK,
			TopP:         r.cfg.TopP,
			Stop:         stop,
			Decode:       func(ids []int) string { return r.tok.Decode(ids, false) },
		}, active)
		if err != nil {
			return nil, err
		}
		if len(res) != sess.batch {
			return nil, fmt.Errorf("generate returned %d rows for a batch of %d", len(res), sess.batch)
		}
		for _, i := range caps[c] {
			got := res[running[i].slot]
			if len(got.IDs) == 0 || len(got.IDs) > c || len(got.LogProbs) != len(got.IDs) {
				return nil, fmt.Errorf("generate returned %d tokens and %d log-probs for a limit of %d", len(got.IDs), len(got.LogProbs), c)
			}
			out[i] = got
		}
	}
	return out, nil
}

// finishBaseline ends a direct or RAG trajectory after its one generation.
func (r *Runner) finishBaseline(w *row, res qwen.Result) {
	switch {
	case strings.Contains(r.tok.Decode(res.IDs, true), AnswerClose):
		r.finish(w, FinishAnswer)
	case res.Finish == qwen.FinishLength:
		r.finish(w, FinishLength)
	default:
		r.finish(w, FinishEOS)
	}
}

// finish closes a trajectory: decodes the response, scores it, finds the
// answer span.
func (r *Runner) finish(w *row, f Finish) {
	if w.done {
		return
	}
	w.done = true
	t := w.t
	t.Finish = f
	resp := t.ResponseIDs()
	t.Response = r.tok.Decode(resp, true)
	runs := generatedRuns(t.ResponseMask())
	texts := make([]string, len(runs))
	for i, g := range runs {
		texts[i] = r.tok.Decode(resp[g[0]:g[1]], true)
	}
	t.Outcome = r.cfg.Reward.ScoreGenerated(t.Response, texts, w.golds)
	t.Prediction, t.EM = t.Outcome.Answer, t.Outcome.EM
	if r.cfg.Mode != ModeAgent && !t.Outcome.HasAnswer {
		t.Prediction = pyStrip(t.Response)
		t.EM = ExactMatch(t.Prediction, w.golds)
	}
	t.AnswerSpan = r.answerSpan(resp, runs, texts)
	if r.OnDone != nil {
		r.OnDone(t)
	}
}

// generatedRuns lists the runs [i, j) of policy-generated tokens (mask 1)
// of a response, in order: the text between observations.
func generatedRuns(mask []uint8) [][2]int {
	var out [][2]int
	for i := 0; i < len(mask); {
		if mask[i] == 0 {
			i++
			continue
		}
		j := i
		for j < len(mask) && mask[j] == 1 {
			j++
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

// answerSpan finds the tokens of the first <answer>…</answer> the policy
// generated: it looks in each run of generated tokens (between
// observations; texts are the runs decoded) in turn, so an answer quoted by
// an observation — the invalid-action message holds "<answer> and
// </answer>" — never counts. The span is AnswerTokenSpan's: the tokens
// strictly inside the tags.
func (r *Runner) answerSpan(resp []int, runs [][2]int, texts []string) [2]int {
	for k, g := range runs {
		if _, _, ok := AnswerSpan(texts[k]); ok {
			if lo, hi := AnswerTokens(r.tok, resp[g[0]:g[1]], texts[k]); hi > lo {
				return [2]int{g[0] + lo, g[0] + hi}
			}
			return [2]int{}
		}
	}
	return [2]int{}
}

// session is the current generation session and its batch size.
type session struct {
	s     Session
	batch int
}

func (s *session) close() {
	if s != nil && s.s != nil {
		s.s.Close()
		s.s = nil
	}
}

// newSession starts a session holding the given rows (slot = position in
// rows) and prefills their sequences so far.
func (r *Runner) newSession(rows []*row, seed uint64) (*session, error) {
	longest := 0
	seqs := make([][]int, len(rows))
	for i, w := range rows {
		w.slot = i
		seqs[i] = w.t.IDs
		longest = max(longest, len(w.t.IDs))
	}
	s, err := r.policy.NewSession(len(rows), longest+r.cfg.MaxTurnTokens+r.cfg.MaxObsTokens, seed)
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	if err := s.Append(seqs); err != nil {
		s.Close()
		return nil, fmt.Errorf("rollout: prefill: %w", err)
	}
	return &session{s: s, batch: len(rows)}, nil
}
