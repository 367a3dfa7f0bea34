package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/internal/scriptpolicy"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/model/tokenizer/tokentest"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
)

// checkStructure verifies the invariants every trajectory must satisfy:
// parallel arrays, a loss mask that is 0 exactly on the prompt and on the
// recorded observation spans, observations that decode to what was meant to
// be appended, and a response within budget.
func checkStructure(t *testing.T, tok Tokenizer, cfg RolloutConfig, tr *Trajectory, contents map[string]string) {
	t.Helper()
	n := len(tr.IDs)
	if len(tr.Mask) != n || len(tr.LogProbs) != n {
		t.Fatalf("traj q%d s%d: %d ids, %d mask, %d logprobs", tr.Question, tr.Sample, n, len(tr.Mask), len(tr.LogProbs))
	}
	if tr.Finish == "" || tr.Turns < 1 {
		t.Fatalf("traj q%d s%d: unfinished (finish %q, turns %d)", tr.Question, tr.Sample, tr.Finish, tr.Turns)
	}
	if max := cfg.Mode.generations(cfg); tr.Turns > max {
		t.Fatalf("traj q%d s%d: %d turns > %d", tr.Question, tr.Sample, tr.Turns, max)
	}
	if got := n - tr.PromptLen; got > cfg.MaxResponseTokens {
		t.Fatalf("traj q%d s%d: response of %d tokens > budget %d", tr.Question, tr.Sample, got, cfg.MaxResponseTokens)
	}
	inObs := make([]bool, n)
	for i := range tr.PromptLen {
		inObs[i] = true
	}
	info := 0
	for _, sp := range tr.Observations {
		if sp.Start < tr.PromptLen || sp.End > n || sp.Start >= sp.End {
			t.Fatalf("bad observation span %+v (prompt %d, len %d)", sp, tr.PromptLen, n)
		}
		for i := sp.Start; i < sp.End; i++ {
			inObs[i] = true
		}
		want := InvalidActionMessage
		if sp.Kind == ObsInformation {
			for tr.Searches[info].Turn == 0 { // the RAG baseline's, in the prompt
				info++
			}
			s := tr.Searches[info]
			info++
			docs := make([]string, len(s.Kept))
			for j, id := range s.Kept {
				docs[j] = contents[id]
			}
			want = FormatInformation(docs, cfg.Info)
			if s.ObsTokens != sp.End-sp.Start {
				t.Fatalf("search %d: obs tokens %d, span %d", info, s.ObsTokens, sp.End-sp.Start)
			}
		}
		checkObservation(t, tok, cfg, tr, sp, want)
	}
	for info < len(tr.Searches) && tr.Searches[info].Turn == 0 {
		info++
	}
	if info != len(tr.Searches) {
		t.Fatalf("%d information spans for %d searches", info, len(tr.Searches))
	}
	for i, m := range tr.Mask {
		if (m == 0) != inObs[i] {
			t.Fatalf("traj q%d s%d: mask[%d] = %d, but in prompt/observation = %v", tr.Question, tr.Sample, i, m, inObs[i])
		}
		if m == 0 && tr.LogProbs[i] != 0 {
			t.Fatalf("log-prob %v on a masked token %d", tr.LogProbs[i], i)
		}
	}
	if tr.Response != tok.Decode(tr.ResponseIDs(), true) {
		t.Fatalf("response text does not decode from the response ids")
	}
	checkAnswerSpan(t, tok, tr)
}

// checkAnswerSpan: the span covers generated tokens only and is the
// AnswerTokens span of the generated run holding it (the tokens strictly
// inside the first <answer>…</answer>, paper Eq. 6): it decodes to text
// inside the answer's content holding all of the trimmed answer except
// bytes of tokens merged with a tag. A trajectory that ended with a
// non-empty answer and no span is one whose answer no token lies entirely
// inside (the documented fallback).
func checkAnswerSpan(t *testing.T, tok Tokenizer, tr *Trajectory) {
	t.Helper()
	resp, mask := tr.ResponseIDs(), tr.ResponseMask()
	lo, hi := tr.AnswerSpan[0], tr.AnswerSpan[1]
	if hi <= lo {
		if tr.AnswerSpan != [2]int{} {
			t.Fatalf("malformed answer span %v", tr.AnswerSpan)
		}
		if tr.Finish == FinishAnswer && strings.TrimSpace(tr.Outcome.Answer) != "" && len(tr.Observations) == 0 {
			text := tok.Decode(resp, true)
			if l, h := AnswerTokens(tok, resp, text); h > l {
				t.Fatalf("answer %q but no answer span", tr.Outcome.Answer)
			}
		}
		return
	}
	for i := lo; i < hi; i++ {
		if mask[i] != 1 {
			t.Fatalf("answer span %v covers a non-generated token at %d", tr.AnswerSpan, i)
		}
	}
	a, b := lo, hi
	for a > 0 && mask[a-1] == 1 {
		a--
	}
	for b < len(mask) && mask[b] == 1 {
		b++
	}
	text := tok.Decode(resp[a:b], true)
	start, end, ok := AnswerSpan(text)
	if !ok {
		t.Fatalf("no answer in the generated run %q holding the span", text)
	}
	content := text[start:end]
	got := tok.Decode(resp[lo:hi], true)
	if l, h := AnswerTokens(tok, resp[a:b], text); a+l != lo || a+h != hi {
		t.Fatalf("answer span %v, AnswerTokens of its run [%d, %d)", tr.AnswerSpan, a+l, a+h)
	}
	if !strings.Contains(content, got) || strings.TrimSpace(got) == "" {
		t.Fatalf("answer span tokens %q are not inside the answer %q", got, content)
	}
}

// checkObservation checks that the span holds the observation want: whole,
// or cut to MaxObsTokens keeping the closing </information>, or cut by the
// response budget.
func checkObservation(t *testing.T, tok Tokenizer, cfg RolloutConfig, tr *Trajectory, sp Span, want string) {
	t.Helper()
	got := tr.IDs[sp.Start:sp.End]
	wantIDs := tok.Encode(want)
	n := len(got)
	switch {
	case slices.Equal(got, wantIDs):
		return
	case sp.End == tr.PromptLen+cfg.MaxResponseTokens && n < cfg.MaxObsTokens && slices.Equal(got, wantIDs[:n]):
		return // cut by the budget
	case sp.End == tr.PromptLen+cfg.MaxResponseTokens && n <= cfg.MaxObsTokens:
		// cut by the limit (keeping the tail), then by the budget
	case n != cfg.MaxObsTokens:
		t.Fatalf("observation of %d tokens cut to %d, neither the limit %d nor the budget", len(wantIDs), n, cfg.MaxObsTokens)
	}
	text := tok.Decode(got, false)
	tail := infoTail(cfg.Info)
	if sp.Kind == ObsInformation && !cfg.ObsCutBlind {
		if n == cfg.MaxObsTokens && !strings.HasSuffix(text, tail) {
			t.Fatalf("cut information block lost its closing tag: …%q", text[max(0, len(text)-40):])
		}
		text = strings.TrimSuffix(text, tail)
	}
	text = strings.TrimRight(text, "\uFFFD")
	if !strings.HasPrefix(want, text) {
		t.Fatalf("observation %+v holds %q, not a prefix of %q", sp, text, want)
	}
}

// TestRolloutTinyModels is the end-to-end test: the golden tiny Qwen2 and
// Qwen3 models sample batched trajectories with BM25 retrieval and APS over a
// few passages. Trajectories terminate, masks cover exactly the appended
// spans, the generator's log-probs equal a teacher-forced re-scoring of the
// same tokens, answer spans are found, and APS's threshold changes how many
// documents are appended.
func TestRolloutTinyModels(t *testing.T) {
	corpus := bm25Corpus(t, 60)
	qs := []qa.Record{
		{ID: "a", Question: "Who was Evan Morris a lobbyist for?", Answers: []string{"Genentech"}},
		{ID: "b", Question: "What did Horatio Hale gather?", Answers: []string{"an Algonkin vocabulary"}},
		{ID: "c", Question: "Where is Genentech?", Answers: []string{"South San Francisco"}},
	}
	for _, tc := range []struct {
		model, family string
		rule          TurnRule
	}{
		{"qwen2-tiny", tokenizer.FamilyQwen25, TurnsPaper},
		{"qwen3-tiny", tokenizer.FamilyQwen3, TurnsCode},
	} {
		t.Run(tc.model, func(t *testing.T) {
			m := tinyModel(t, tc.model)
			tok := newPieceTok(m.Config.VocabSize, tc.family)
			if m.Config.EOSTokenID[0] != tok.EOS() {
				t.Fatalf("tiny model EOS %v, test tokenizer assumes %d", m.Config.EOSTokenID, tok.EOS())
			}
			keptPerSearch := map[float64]float64{}
			for _, qhat := range []float64{0.5, math.Inf(1)} {
				cfg := DefaultRolloutConfig()
				cfg.TurnRule = tc.rule
				cfg.MaxTurnTokens = 24
				cfg.MaxObsTokens = 64
				cfg.MaxResponseTokens = 400
				cfg.SetAPS(conformal.APS{Temperature: 1, MinDocs: 1, MaxDocs: 5}, qhat)
				r, err := NewRunner(QwenPolicy{m}, tok, corpus.retriever, cfg)
				if err != nil {
					t.Fatal(err)
				}
				done := 0
				r.OnDone = func(*Trajectory) { done++ }
				trajs, err := r.Run(context.Background(), qs, 4, 7)
				if err != nil {
					t.Fatal(err)
				}
				if len(trajs) != 12 || done != 12 {
					t.Fatalf("%d trajectories, %d reported done, want 12", len(trajs), done)
				}
				searches, kept, answers := 0, 0, 0
				for i, tr := range trajs {
					if tr.Question != i/4 || tr.Sample != i%4 || tr.QuestionID != qs[i/4].ID {
						t.Fatalf("trajectory %d is q%d s%d", i, tr.Question, tr.Sample)
					}
					checkStructure(t, tok, cfg, tr, corpus.contents)
					for _, s := range tr.Searches {
						searches++
						kept += len(s.Kept)
						scores := make([]float64, len(s.Candidates))
						for j, c := range s.Candidates {
							scores[j] = float64(c.Score)
						}
						if want := cfg.APS.APS.Keep(scores, qhat); len(s.Kept) != want {
							t.Fatalf("search %q kept %d passages, APS says %d", s.Query, len(s.Kept), want)
						}
					}
					if tr.AnswerSpan[1] > tr.AnswerSpan[0] {
						answers++
					}
				}
				if searches == 0 || answers == 0 {
					t.Fatalf("the random policy never searched (%d) or answered (%d): the test does not exercise the loop", searches, answers)
				}
				keptPerSearch[qhat] = float64(kept) / float64(searches)
				finishes := map[Finish]int{}
				for _, tr := range trajs {
					finishes[tr.Finish]++
				}
				t.Logf("q̂ %v: %d searches, %.2f passages each, %d answer spans, finishes %v", qhat, searches, keptPerSearch[qhat], answers, finishes)
				checkLogProbs(t, m, trajs)
			}
			if !(keptPerSearch[0.5] < keptPerSearch[math.Inf(1)]) {
				t.Fatalf("APS did not change the documents appended: %v", keptPerSearch)
			}
		})
	}
}

// checkLogProbs re-scores every trajectory teacher-forced in one right-padded
// batch and compares with the generator's log-probs on generated tokens.
func checkLogProbs(t *testing.T, m *qwen.Model, trajs []*Trajectory) {
	t.Helper()
	longest := 0
	for _, tr := range trajs {
		longest = max(longest, len(tr.IDs))
	}
	b := len(trajs)
	ids := make([]int32, b*longest)
	mask := make([]int32, b*longest)
	for i, tr := range trajs {
		for j, id := range tr.IDs {
			ids[i*longest+j], mask[i*longest+j] = int32(id), 1
		}
	}
	logp, _, err := m.Score(ids, mask, nil, b, longest, qwen.ScoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	worst, checked := 0.0, 0
	for i, tr := range trajs {
		for j, mk := range tr.Mask {
			if mk == 0 {
				continue
			}
			checked++
			worst = math.Max(worst, math.Abs(float64(logp[i*longest+j]-tr.LogProbs[j])))
		}
	}
	if checked == 0 || worst > 1e-4 {
		t.Fatalf("generator vs teacher-forced log-probs: max |diff| %g over %d tokens (want ≤ 1e-4)", worst, checked)
	}
}

// scripted returns a runner over a scripted policy with the real Qwen3
// tokenizer and the BM25 test corpus.
func scripted(t *testing.T, cfg RolloutConfig, r search.Retriever, next func(q string, gen int) (string, qwen.FinishReason)) (*Runner, *scriptPolicy, *tokenizer.Tokenizer) {
	t.Helper()
	tok := tokentest.Qwen3(t)
	eos, ok := tok.TokenID("<|im_end|>")
	if !ok {
		t.Fatal("no <|im_end|>")
	}
	p := &scriptPolicy{scriptpolicy.Policy{Tok: tok, EOS: eos, Vocab: 151936, MaxCtx: 40960, Next: next}}
	run, err := NewRunner(p, tok, r, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return run, p, tok
}

// TestRolloutScripted drives the loop with fixed text and the real Qwen3
// tokenizer: the prompt is the paper's in the chat template with thinking
// off, only new tokens are fed to the session, the first search of a turn
// is executed (later text in the turn is cut by the stop string), and the
// reward, answer span and records come out exactly.
func TestRolloutScripted(t *testing.T) {
	corpus := bm25Corpus(t, 60)
	cfg := DefaultRolloutConfig()
	cfg.CompactBelow = 0
	next := func(q string, gen int) (string, qwen.FinishReason) {
		switch gen {
		case 1:
			return "<think> I need to find out.</think>\n<search> south state family California </search> <search>ignored</search>", qwen.FinishStop
		default:
			return "<think> It says Genentech.</think>\n<answer> Genentech </answer>", qwen.FinishStop
		}
	}
	run, pol, tok := scripted(t, cfg, corpus.retriever, next)
	qs := []qa.Record{{ID: "q1", Question: "Who did Evan Morris lobby for?", Answers: []string{"Genentech"}}}
	trajs, err := run.Run(context.Background(), qs, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := PromptMessages(qs[0].Question, PlacementSystemUser)
	no := false
	promptText, _ := tok.RenderChat(msgs, tokenizer.ChatOptions{Family: tokenizer.FamilyQwen3, AddGenerationPrompt: true, EnableThinking: &no})
	if !strings.HasSuffix(promptText, "<|im_start|>assistant\n<think>\n\n</think>\n\n") {
		t.Fatalf("Qwen3 prompt does not end with an empty think block: %q", promptText[len(promptText)-60:])
	}
	if len(pol.Sessions) != 1 {
		t.Fatalf("%d sessions, want 1", len(pol.Sessions))
	}
	sess := pol.Sessions[0]
	for i, tr := range trajs {
		checkStructure(t, tok, cfg, tr, corpus.contents)
		if !slices.Equal(tr.IDs[:tr.PromptLen], tok.Encode(promptText)) {
			t.Fatalf("prompt tokens differ from the rendered chat template")
		}
		// only new tokens were fed: the session's sequence is the trajectory
		if !slices.Equal(sess.Seqs[i], tr.IDs) {
			t.Fatalf("session row %d holds %d tokens, trajectory %d", i, len(sess.Seqs[i]), len(tr.IDs))
		}
		if tr.Finish != FinishAnswer || tr.Turns != 2 || len(tr.Searches) != 1 {
			t.Fatalf("finish %s, turns %d, searches %d; want answer, 2, 1", tr.Finish, tr.Turns, len(tr.Searches))
		}
		s := tr.Searches[0]
		if s.Query != "south state family California" || len(s.Kept) != cfg.TopK || s.Turn != 1 {
			t.Fatalf("search %+v", s)
		}
		if strings.Contains(tr.Response, "ignored") {
			t.Fatalf("text after the first </search> was kept: %q", tr.Response)
		}
		if !tr.Outcome.Valid || !tr.EM || tr.Outcome.Reward != 1 || tr.Prediction != "Genentech" {
			t.Fatalf("outcome %+v, prediction %q", tr.Outcome, tr.Prediction)
		}
		// log-probs: generation g's j-th token has −(g + j/1000)
		resp := tr.ResponseIDs()
		lps := tr.ResponseLogProbs()
		if lps[0] != -1 || !strings.HasSuffix(tok.Decode(resp, true), "</answer>") || lps[len(lps)-1] > -2 {
			t.Fatalf("log-probs misplaced: first %v, last %v", lps[0], lps[len(lps)-1])
		}
		nll := tr.AnswerNLL()
		if !(nll > 2 && nll < 2.1) {
			t.Fatalf("answer NLL %v, want the second generation's ≈ 2.0xx", nll)
		}
	}
}

// TestRolloutTurnRules checks the turn limits and the invalid-action message
// under both countings.
func TestRolloutTurnRules(t *testing.T) {
	corpus := bm25Corpus(t, 60)
	alwaysSearch := func(string, int) (string, qwen.FinishReason) {
		return "<think>more</think><search>Horatio Hale</search>", qwen.FinishStop
	}
	rambling := func(string, int) (string, qwen.FinishReason) {
		return "<think>I keep thinking about this question for a very long while", qwen.FinishLength
	}
	stopsEarly := func(string, int) (string, qwen.FinishReason) { return "I do not know.", qwen.FinishEOS }
	for _, tc := range []struct {
		name       string
		rule       TurnRule
		maxTurns   int
		next       func(string, int) (string, qwen.FinishReason)
		turns      int
		searches   int
		invalid    int
		finish     Finish
		maxTurnTok int
	}{
		{"paper: 2 rounds then a final generation", TurnsPaper, 2, alwaysSearch, 3, 2, 0, FinishTurns, 500},
		{"code: 2 generations, the 2nd search not run", TurnsCode, 2, alwaysSearch, 2, 1, 0, FinishTurns, 500},
		{"paper: 4 rounds", TurnsPaper, 4, alwaysSearch, 5, 4, 0, FinishTurns, 500},
		{"invalid turns get the message", TurnsPaper, 2, rambling, 3, 0, 2, FinishTurns, 8},
		{"EOS without an action ends", TurnsPaper, 4, stopsEarly, 1, 0, 0, FinishEOS, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultRolloutConfig()
			cfg.TurnRule, cfg.MaxTurns, cfg.CompactBelow, cfg.MaxTurnTokens = tc.rule, tc.maxTurns, 0, tc.maxTurnTok
			run, _, tok := scripted(t, cfg, corpus.retriever, tc.next)
			trajs, err := run.Run(context.Background(), []qa.Record{{ID: "x", Question: "Who was Horatio Hale?", Answers: []string{"an ethnologist"}}}, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			tr := trajs[0]
			checkStructure(t, tok, cfg, tr, corpus.contents)
			invalid := 0
			for _, o := range tr.Observations {
				if o.Kind == ObsInvalid {
					invalid++
				}
			}
			if tr.Turns != tc.turns || len(tr.Searches) != tc.searches || invalid != tc.invalid || tr.Finish != tc.finish {
				t.Fatalf("turns %d searches %d invalid %d finish %s; want %d %d %d %s",
					tr.Turns, len(tr.Searches), invalid, tr.Finish, tc.turns, tc.searches, tc.invalid, tc.finish)
			}
			// The invalid-action message itself holds "<answer> and </answer>":
			// the policy never answered, so there is no answer and reward 0;
			// under the official whole-text rule the last answer of the
			// response is "and", which earns 0.1.
			if tr.Outcome.Answer != "" || tr.Outcome.HasAnswer || tr.Outcome.EM || tr.Outcome.Valid || tr.Outcome.Reward != 0 {
				t.Fatalf("outcome %+v, want no answer, no EM, invalid, reward 0", tr.Outcome)
			}
			whole := cfg.Reward
			whole.AnswerFrom = AnswerFromText
			if o := whole.Score(tr.Response, []string{"Paris"}); tc.invalid > 0 && (o.Answer != "and" || o.Reward != 0.1) {
				t.Fatalf("whole-text rule: %+v, want answer \"and\", reward 0.1", o)
			}
			if tc.invalid > 0 && !strings.Contains(tr.Response, "My previous action is invalid.") {
				t.Fatalf("response lacks the invalid-action message: %q", tr.Response)
			}
		})
	}
}

// TestRolloutAPSvsTopK: with the same scripted search, APS appends exactly
// the documents its rule keeps and fixed top-k appends k.
func TestRolloutAPSvsTopK(t *testing.T) {
	corpus := bm25Corpus(t, 60)
	next := func(q string, gen int) (string, qwen.FinishReason) {
		if gen == 1 {
			return "<think>search</think><search>" + q + "</search>", qwen.FinishStop
		}
		return "<think>done</think><answer>x</answer>", qwen.FinishStop
	}
	qs := []qa.Record{
		{ID: "1", Question: "south state family California school", Answers: []string{"x"}},
		{ID: "2", Question: "world war first built known early years", Answers: []string{"x"}},
	}
	aps := conformal.APS{Temperature: 2, MinDocs: 1, MaxDocs: 5}
	for _, tc := range []struct {
		name string
		set  func(*RolloutConfig)
		want func(scores []float64) int
	}{
		{"top-3", func(c *RolloutConfig) { c.TopK = 3 }, func([]float64) int { return 3 }},
		{"top-1", func(c *RolloutConfig) { c.TopK = 1 }, func([]float64) int { return 1 }},
		{"aps q=0.6", func(c *RolloutConfig) { c.SetAPS(aps, 0.6) }, func(s []float64) int { return aps.Keep(s, 0.6) }},
		{"aps q=0.99", func(c *RolloutConfig) { c.SetAPS(aps, 0.99) }, func(s []float64) int { return aps.Keep(s, 0.99) }},
		{"aps q=+Inf", func(c *RolloutConfig) { c.SetAPS(aps, math.Inf(1)) }, func([]float64) int { return 5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultRolloutConfig()
			cfg.CompactBelow = 0
			tc.set(&cfg)
			run, _, tok := scripted(t, cfg, corpus.retriever, next)
			trajs, err := run.Run(context.Background(), qs, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range trajs {
				checkStructure(t, tok, cfg, tr, corpus.contents)
				s := tr.Searches[0]
				scores := make([]float64, len(s.Candidates))
				for j, c := range s.Candidates {
					scores[j] = float64(c.Score)
				}
				want := tc.want(scores)
				if len(s.Kept) != want {
					t.Fatalf("kept %d, want %d (scores %v)", len(s.Kept), want, scores)
				}
				info := tr.Response
				if s.Truncated {
					info = tok.Decode(tok.Encode(FormatInformation(docsOf(corpus, s.Kept), cfg.Info)), true)
				}
				if !strings.Contains(info, fmt.Sprintf("Doc %d (Title:", want)) || strings.Contains(info, fmt.Sprintf("Doc %d (Title:", want+1)) {
					t.Fatalf("information block does not hold exactly %d docs", want)
				}
			}
		})
	}
}

func docsOf(c *testCorpus, ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = c.contents[id]
	}
	return out
}

// TestRolloutBaselines runs the direct and RAG baselines.
func TestRolloutBaselines(t *testing.T) {
	corpus := bm25Corpus(t, 60)
	next := func(q string, gen int) (string, qwen.FinishReason) {
		if strings.Contains(q, "Hale") {
			return "Algonkin vocabulary", qwen.FinishEOS // no tags: the whole response is the prediction
		}
		return "<answer> Genentech </answer>", qwen.FinishStop
	}
	qs := []qa.Record{
		{ID: "1", Question: "Evan Morris lobbied for which company?", Answers: []string{"Genentech"}},
		{ID: "2", Question: "What did Horatio Hale gather?", Answers: []string{"an Algonkin vocabulary"}},
	}
	for _, mode := range []Mode{ModeDirect, ModeRAG} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := DefaultRolloutConfig()
			cfg.Mode = mode
			var r search.Retriever
			if mode == ModeRAG {
				r = corpus.retriever
			}
			run, _, tok := scripted(t, cfg, r, next)
			trajs, err := run.Run(context.Background(), qs, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, tr := range trajs {
				checkStructure(t, tok, cfg, tr, corpus.contents)
				if !tr.EM || tr.Turns != 1 {
					t.Fatalf("%s q%d: prediction %q EM %v turns %d", mode, tr.Question, tr.Prediction, tr.EM, tr.Turns)
				}
				prompt := tok.Decode(tr.IDs[:tr.PromptLen], false)
				hasInfo := strings.Contains(prompt, "<information>Doc 1 (Title:")
				if hasInfo != (mode == ModeRAG) || (mode == ModeRAG) != (len(tr.Searches) == 1) {
					t.Fatalf("%s: information in prompt %v, searches %d", mode, hasInfo, len(tr.Searches))
				}
				if mode == ModeRAG && (tr.Searches[0].Turn != 0 || tr.Searches[0].Query != qs[tr.Question].Question) {
					t.Fatalf("RAG search record %+v", tr.Searches[0])
				}
			}
		})
	}
}

// TestRolloutBadInput: bad questions, prompts longer than the context,
// mismatched vocabularies and failing retrievers give clear errors or
// bounded retries, never a silently wrong trajectory.
func TestRolloutBadInput(t *testing.T) {
	corpus := bm25Corpus(t, 60)
	search1 := func(string, int) (string, qwen.FinishReason) {
		return "<think>x</think><search>Evan Morris</search>", qwen.FinishStop
	}
	q := []qa.Record{{ID: "q", Question: "Who is Evan Morris?", Answers: []string{"a lobbyist"}}}
	var calls atomic.Int32
	failing := retrieverFunc(func(ctx context.Context, qs []string, k int) ([][]search.Hit, error) {
		calls.Add(1)
		return nil, errors.New("connection refused")
	})
	hanging := retrieverFunc(func(ctx context.Context, qs []string, k int) ([][]search.Hit, error) {
		calls.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	short := retrieverFunc(func(ctx context.Context, qs []string, k int) ([][]search.Hit, error) {
		calls.Add(1)
		return [][]search.Hit{}, nil
	})
	nan := retrieverFunc(func(ctx context.Context, qs []string, k int) ([][]search.Hit, error) {
		calls.Add(1)
		return [][]search.Hit{{{Doc: search.Doc{ID: "1", Contents: "x\ny"}, Score: float32(math.NaN())}}}, nil
	})
	for _, tc := range []struct {
		name    string
		qs      []qa.Record
		r       search.Retriever
		set     func(*RolloutConfig)
		vocab   int
		wantErr string
		calls   int32
	}{
		{"no questions", nil, corpus.retriever, nil, 0, "no questions", 0},
		{"blank question", []qa.Record{{ID: "b", Question: "  "}}, corpus.retriever, nil, 0, `question 0 (id "b"): prompt: empty question`, 0},
		{"prompt over the limit", q, corpus.retriever, func(c *RolloutConfig) { c.MaxPromptTokens = 50 }, 0, "more than the limit of 50", 0},
		{"prompt over the context", q, corpus.retriever, nil, 0, "model context 100", 0},
		{"vocabulary mismatch", q, corpus.retriever, nil, 1000, "outside the model's vocabulary [0, 1000)", 0},
		{"retriever errors", q, failing, nil, 0, "3 attempts failed: connection refused", 3},
		{"retriever times out", q, hanging, func(c *RolloutConfig) { c.RetrieveTimeout = 20 * time.Millisecond }, 0, "timed out after 20ms", 3},
		{"retriever returns too few lists", q, short, nil, 0, "0 result lists for 1 queries", 3},
		{"retriever returns NaN", q, nan, nil, 0, "score NaN", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls.Store(0)
			cfg := DefaultRolloutConfig()
			cfg.RetryBackoff = time.Millisecond
			if tc.set != nil {
				tc.set(&cfg)
			}
			run, pol, _ := scripted(t, cfg, tc.r, search1)
			if tc.vocab > 0 {
				pol.Vocab = tc.vocab
			}
			if strings.Contains(tc.wantErr, "model context") {
				pol.MaxCtx = 100
			}
			trajs, err := run.Run(context.Background(), tc.qs, 1, 0)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if trajs != nil {
				t.Fatalf("got trajectories with an error")
			}
			if calls.Load() != tc.calls {
				t.Fatalf("%d retriever calls, want %d", calls.Load(), tc.calls)
			}
		})
	}
}

// TestRolloutFlakyRetriever: a retriever that fails once is retried and the
// trajectory is the same as with a healthy one.
func TestRolloutFlakyRetriever(t *testing.T) {
	corpus := bm25Corpus(t, 60)
	next := func(q string, gen int) (string, qwen.FinishReason) {
		if gen == 1 {
			return "<think>x</think><search>Evan Morris</search>", qwen.FinishStop
		}
		return "<think>y</think><answer>Roche</answer>", qwen.FinishStop
	}
	var calls atomic.Int32
	flaky := retrieverFunc(func(ctx context.Context, qs []string, k int) ([][]search.Hit, error) {
		if calls.Add(1) == 1 {
			return nil, errors.New("HTTP 503")
		}
		return corpus.retriever.Retrieve(ctx, qs, k)
	})
	cfg := DefaultRolloutConfig()
	cfg.RetryBackoff = time.Millisecond
	q := []qa.Record{{ID: "q", Question: "Who is Evan Morris?", Answers: []string{"Roche"}}}
	var got [2]*Trajectory
	for i, r := range []search.Retriever{flaky, corpus.retriever} {
		run, _, _ := scripted(t, cfg, r, next)
		trajs, err := run.Run(context.Background(), q, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		got[i] = trajs[0]
	}
	if calls.Load() != 2 || !slices.Equal(got[0].IDs, got[1].IDs) || got[0].Outcome.Reward != 1 {
		t.Fatalf("calls %d, same ids %v, reward %v", calls.Load(), slices.Equal(got[0].IDs, got[1].IDs), got[0].Outcome.Reward)
	}
}

// TestRolloutBudget: the response budget cuts observations and ends the
// trajectory, and is never exceeded.
func TestRolloutBudget(t *testing.T) {
	corpus := bm25Corpus(t, 60)
	next := func(q string, gen int) (string, qwen.FinishReason) {
		return "<think>x</think><search>Evan Morris</search>", qwen.FinishStop
	}
	for _, budget := range []int{5, 30, 200} {
		cfg := DefaultRolloutConfig()
		cfg.MaxResponseTokens = budget
		run, _, tok := scripted(t, cfg, corpus.retriever, next)
		trajs, err := run.Run(context.Background(), []qa.Record{{ID: "q", Question: "Who is Evan Morris?"}}, 3, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range trajs {
			checkStructure(t, tok, cfg, tr, corpus.contents)
			if tr.Finish != FinishLength || len(tr.ResponseIDs()) != budget {
				t.Fatalf("budget %d: finish %s with %d response tokens", budget, tr.Finish, len(tr.ResponseIDs()))
			}
		}
	}
}

func TestRolloutConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*RolloutConfig)
		want string
	}{
		{"default", func(*RolloutConfig) {}, ""},
		{"zero turns", func(c *RolloutConfig) { c.MaxTurns = 0 }, "max turns 0"},
		{"code rule, one turn", func(c *RolloutConfig) { c.TurnRule, c.MaxTurns = TurnsCode, 1 }, "leaves no search"},
		{"top-k 0", func(c *RolloutConfig) { c.TopK = 0 }, "top-k 0"},
		{"bad APS", func(c *RolloutConfig) { c.SetAPS(conformal.APS{}, 0.5) }, "temperature"},
		{"NaN q̂", func(c *RolloutConfig) { c.SetAPS(conformal.PaperAPS(), math.NaN()) }, "NaN"},
		{"no candidates", func(c *RolloutConfig) { c.SetAPS(conformal.PaperAPS(), 0.5); c.Candidates = 0 }, "candidates 0"},
		{"top-p", func(c *RolloutConfig) { c.TopP = 2 }, "top-p"},
		{"attempts", func(c *RolloutConfig) { c.RetrieveAttempts = 0 }, "attempts"},
		{"compact", func(c *RolloutConfig) { c.CompactBelow = 2 }, "compact"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultRolloutConfig()
			tc.set(&c)
			err := c.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := NewRunner(&scriptPolicy{}, newPieceTok(384, "llama"), nil, DefaultRolloutConfig()); err == nil {
		t.Fatal("agent mode without a retriever accepted")
	}
	c := DefaultRolloutConfig()
	c.Mode = ModeDirect
	if _, err := NewRunner(&scriptPolicy{}, newPieceTok(384, "llama"), nil, c); err == nil || !strings.Contains(err.Error(), "chat template family") {
		t.Fatalf("unknown chat family: %v", err)
	}
}

func TestParseRolloutFlags(t *testing.T) {
	for _, tc := range []struct {
		in   string
		mode Mode
		rule TurnRule
		ok   bool
	}{
		{"agent", ModeAgent, TurnsPaper, true},
		{" RAG ", ModeRAG, TurnsPaper, true},
		{"direct", ModeDirect, TurnsPaper, true},
		{"code", 0, TurnsCode, true},
		{"bogus", 0, 0, false},
	} {
		m, errM := ParseMode(tc.in)
		r, errR := ParseTurnRule(tc.in)
		if tc.ok && errM != nil && errR != nil {
			t.Fatalf("%q: %v / %v", tc.in, errM, errR)
		}
		if errM == nil && m != tc.mode {
			t.Fatalf("ParseMode(%q) = %v", tc.in, m)
		}
		if errR == nil && r != tc.rule {
			t.Fatalf("ParseTurnRule(%q) = %v", tc.in, r)
		}
		if !tc.ok && (errM == nil || errR == nil) {
			t.Fatalf("%q accepted", tc.in)
		}
	}
	for _, m := range []Mode{ModeAgent, ModeDirect, ModeRAG} {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Fatalf("round trip of %v", m)
		}
	}
}

// TestTokenSpan maps byte ranges onto Qwen3 BPE tokens, including
// multi-byte characters split across tokens.
func TestTokenSpan(t *testing.T) {
	tok := tokentest.Qwen3(t)
	for _, text := range []string{
		"<think>x</think>\n<answer> Genentech </answer>",
		"<think>über</think><answer>São Paulo – 東京</answer>",
		"<answer>A</answer>",
		"<answer>🙂🙂</answer> tail",
	} {
		ids := tok.Encode(text)
		start, end, _ := AnswerSpan(text)
		lo, hi := TokenSpan(tok, ids, text, start, end)
		got := tok.Decode(ids[lo:hi], true)
		if !strings.Contains(got, text[start:end]) {
			t.Fatalf("%q: span [%d,%d) decodes to %q", text, lo, hi, got)
		}
		if hi-lo > 1 {
			if strings.Contains(tok.Decode(ids[lo+1:hi], true), text[start:end]) || strings.Contains(tok.Decode(ids[lo:hi-1], true), text[start:end]) {
				t.Fatalf("%q: span [%d,%d) not minimal", text, lo, hi)
			}
		}
	}
	if lo, hi := TokenSpan(tok, nil, "", 0, 0); lo != 0 || hi != 0 {
		t.Fatal("empty span")
	}
}

// BenchmarkRolloutLoop measures the loop's own cost (prompting, parsing,
// retrieval bookkeeping, spans, reward) with a scripted policy.
func BenchmarkRolloutLoop(b *testing.B) {
	corpus := bm25Corpus(b, 60)
	tok := tokentest.Qwen3(b)
	eos, _ := tok.TokenID("<|im_end|>")
	next := func(q string, gen int) (string, qwen.FinishReason) {
		if gen < 3 {
			return "<think>I need more.</think><search>Evan Morris lobbyist</search>", qwen.FinishStop
		}
		return "<think>Found.</think><answer> Genentech </answer>", qwen.FinishStop
	}
	cfg := DefaultRolloutConfig()
	cfg.CompactBelow = 0
	qs := make([]qa.Record, 16)
	for i := range qs {
		qs[i] = qa.Record{ID: fmt.Sprint(i), Question: "Who did Evan Morris lobby for?", Answers: []string{"Genentech"}}
	}
	for b.Loop() {
		p := &scriptPolicy{scriptpolicy.Policy{Tok: tok, EOS: eos, Vocab: 151936, MaxCtx: 40960, Next: next}}
		run, err := NewRunner(p, tok, corpus.retriever, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := run.Run(context.Background(), qs, 5, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(qs)*5), "trajectories/op")
}

func BenchmarkTokenSpan(b *testing.B) {
	tok := tokentest.Qwen3(b)
	text := strings.Repeat("<think>Some reasoning about the documents.</think><search>query</search><information>Doc 1 (Title: X)\ntext text text</information>", 20) +
		"<think>done</think><answer> The final answer </answer>"
	ids := tok.Encode(text)
	start, end, _ := AnswerSpan(text)
	for b.Loop() {
		TokenSpan(tok, ids, text, start, end)
	}
	b.ReportMetric(float64(len(ids)), "tokens")
}

// TestRolloutEmptyQuery: an empty <search></search> is not sent to the
// retriever and gets an empty information block.
func TestRolloutEmptyQuery(t *testing.T) {
	var calls atomic.Int32
	counting := retrieverFunc(func(ctx context.Context, qs []string, k int) ([][]search.Hit, error) {
		calls.Add(1)
		return make([][]search.Hit, len(qs)), nil
	})
	next := func(q string, gen int) (string, qwen.FinishReason) {
		if gen == 1 {
			return "<think>x</think><search>  </search>", qwen.FinishStop
		}
		return "<think>y</think><answer>z</answer>", qwen.FinishStop
	}
	cfg := DefaultRolloutConfig()
	run, _, tok := scripted(t, cfg, counting, next)
	trajs, err := run.Run(context.Background(), []qa.Record{{ID: "q", Question: "Q?", Answers: []string{"z"}}}, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range trajs {
		checkStructure(t, tok, cfg, tr, nil)
		if len(tr.Searches) != 1 || len(tr.Searches[0].Kept) != 0 || !strings.Contains(tr.Response, "<information></information>") || tr.Outcome.Reward != 1 {
			t.Fatalf("searches %+v, response %q, reward %v", tr.Searches, tr.Response, tr.Outcome.Reward)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("empty queries reached the retriever %d times", calls.Load())
	}
}
