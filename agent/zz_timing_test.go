package agent

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/model/qwen"
)

type timedPolicy struct {
	Policy
	t *testing.T
}
type timedSession struct {
	Session
	t *testing.T
	b int
}

func (p timedPolicy) NewSession(batch, capacity int, seed uint64) (Session, error) {
	s, err := p.Policy.NewSession(batch, capacity, seed)
	p.t.Logf("new session batch %d cap %d", batch, capacity)
	return timedSession{s, p.t, batch}, err
}
func (s timedSession) Append(tokens [][]int) error {
	st := time.Now()
	n := 0
	for _, x := range tokens {
		n = max(n, len(x))
	}
	err := s.Session.Append(tokens)
	s.t.Logf("append b%d longest %d: %v", s.b, n, time.Since(st))
	return err
}
func (s timedSession) Generate(o qwen.GenerateOptions, a []bool) ([]qwen.Result, error) {
	st := time.Now()
	r, err := s.Session.Generate(o, a)
	n := 0
	for _, x := range r {
		n = max(n, len(x.IDs))
	}
	s.t.Logf("generate b%d max %d steps %d: %v", s.b, o.MaxNewTokens, n, time.Since(st))
	return r, err
}

func TestZZTiming(t *testing.T) {
	corpus := bm25Corpus(t, 60)
	m := tinyModel(t, "qwen3-tiny")
	tok := pieceTok{vocab: 384, family: "qwen3"}
	cfg := DefaultRolloutConfig()
	cfg.MaxTurnTokens = 24
	cfg.MaxObsTokens = 64
	cfg.MaxResponseTokens = 400
	cfg.SetAPS(conformal.APS{Temperature: 1, MinDocs: 1, MaxDocs: 5}, math.Inf(1))
	r, _ := NewRunner(timedPolicy{QwenPolicy{m}, t}, tok, corpus.retriever, cfg)
	qs := []Question{{ID: "a", Text: "Who?"}, {ID: "b", Text: "What?"}, {ID: "c", Text: "Where?"}}
	st := time.Now()
	trajs, err := r.Run(context.Background(), qs, 4, 7)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run %v", time.Since(st))
	st = time.Now()
	checkLogProbs(t, m, trajs)
	t.Logf("score %v", time.Since(st))
}
