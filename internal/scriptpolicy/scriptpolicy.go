// Package scriptpolicy is a scripted language model for tests of the agent
// and of what drives it (bench's evaluation): its sessions write fixed text
// through the same rollout code path as a model. Next(question, gen) gives
// the text of the gen-th generation (1-based) of a row whose prompt asks
// question, and how it ends (qwen.FinishEOS appends the EOS id). Generation
// stops after the token completing a stop string, as the model's does.
// Every token's log-prob is −(gen + position/1000), so tests can check
// where each one landed. Sessions record what was appended, to check that
// only new tokens are fed.
//
// The package does not import agent (agent's own tests use it): a test
// adapts Policy to agent.Policy with a one-line NewSession that returns
// Start(batch).
package scriptpolicy

import (
	"fmt"
	"strings"
	"sync"

	"github.com/cas-engine/cas/model/qwen"
)

// Tokenizer is the part of the agent's tokenizer the script needs.
type Tokenizer interface {
	Encode(text string) []int
	Decode(ids []int, skipSpecial bool) string
}

// Policy is the scripted model; Sessions lists every session started.
type Policy struct {
	Tok    Tokenizer
	EOS    int
	Vocab  int
	MaxCtx int
	Next   func(question string, gen int) (string, qwen.FinishReason)

	mu       sync.Mutex
	Sessions []*Session
}

// Start begins a session of batch empty rows and records it.
func (p *Policy) Start(batch int) *Session {
	s := &Session{p: p, Seqs: make([][]int, batch), gens: make([]int, batch)}
	p.mu.Lock()
	p.Sessions = append(p.Sessions, s)
	p.mu.Unlock()
	return s
}

// MaxContext is MaxCtx.
func (p *Policy) MaxContext() int { return p.MaxCtx }

// VocabSize is Vocab.
func (p *Policy) VocabSize() int { return p.Vocab }

// Session is one batch of the scripted model.
type Session struct {
	p       *Policy
	Seqs    [][]int // everything fed or generated, per row
	gens    []int
	Appends int  // calls of Append
	Closed  bool // whether Close was called
}

// Append feeds new tokens to every row.
func (s *Session) Append(tokens [][]int) error {
	if len(tokens) != len(s.Seqs) {
		return fmt.Errorf("append: %d rows for %d", len(tokens), len(s.Seqs))
	}
	s.Appends++
	for b, ids := range tokens {
		s.Seqs[b] = append(s.Seqs[b], ids...)
	}
	return nil
}

// Question extracts the question from a row's prompt text: what follows
// the last "Question: " up to a newline or a tag.
func (s *Session) Question(b int) string {
	text := s.p.Tok.Decode(s.Seqs[b], true)
	i := strings.LastIndex(text, "Question: ")
	if i < 0 {
		return ""
	}
	q := text[i+len("Question: "):]
	if j := strings.IndexAny(q, "\n<"); j >= 0 {
		q = q[:j]
	}
	return q
}

// Generate writes the next scripted text of each active row.
func (s *Session) Generate(opts qwen.GenerateOptions, active []bool) ([]qwen.Result, error) {
	out := make([]qwen.Result, len(s.Seqs))
	for b := range s.Seqs {
		if active != nil && !active[b] {
			continue
		}
		s.gens[b]++
		text, fin := s.p.Next(s.Question(b), s.gens[b])
		ids := s.p.Tok.Encode(text)
		if fin == qwen.FinishEOS {
			ids = append(ids, s.p.EOS)
		}
		r := qwen.Result{Finish: fin}
		for i := 1; i <= len(ids); i++ {
			if i > opts.MaxNewTokens {
				r.Finish = qwen.FinishLength
				ids = ids[:opts.MaxNewTokens]
				break
			}
			tail := opts.Decode(ids[:i])
			stopped := false
			for _, st := range opts.Stop {
				if strings.Contains(tail, st) {
					r.Finish, r.StopString, stopped = qwen.FinishStop, st, true
				}
			}
			if stopped {
				ids = ids[:i]
				break
			}
		}
		r.IDs = ids
		for i := range ids {
			r.LogProbs = append(r.LogProbs, -float32(s.gens[b])-float32(i)/1000)
		}
		s.Seqs[b] = append(s.Seqs[b], ids...)
		out[b] = r
	}
	return out, nil
}

// Close marks the session closed.
func (s *Session) Close() { s.Closed = true }
