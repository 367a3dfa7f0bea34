package world

import (
	"fmt"
	"io"
	"slices"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/world/bpe"
)

// Stats are the sizes of a world and its token counts under a tokenizer.
type Stats struct {
	Entities      int
	Passages      int
	Questions     [NumSplits]int
	TwoHop        [NumSplits]int
	VocabSize     int
	TokensPassage float64 // mean tokens per passage (contents)
	TokensPrompt  float64 // mean tokens of the chat-rendered prompt
	TokensSingle  float64 // mean tokens of a scripted single-hop response
	TokensTwoHop  float64 // mean tokens of a scripted two-hop response
	DocsPerSearch int     // documents per information block in the scripted responses
	BytesPerToken float64 // passage bytes per token (compression)
}

// Encoder is what Stats needs of a tokenizer.
type Encoder interface{ Encode(string) []int }

// ComputeStats measures the world under enc. Scripted responses retrieve
// docsPerSearch passages per hop: the hop's primary gold passage and
// passages drawn at random (seeded) from the rest, rendered as the
// agent does (agent.InfoCode).
func (w *World) ComputeStats(enc Encoder, vocabSize, docsPerSearch int) (Stats, error) {
	st := Stats{Entities: len(w.Entities), Passages: len(w.Passages), VocabSize: vocabSize, DocsPerSearch: docsPerSearch}
	var tok, bytes int
	for _, p := range w.Passages {
		c := p.Contents()
		tok += len(enc.Encode(c))
		bytes += len(c)
	}
	st.TokensPassage = float64(tok) / float64(max(1, len(w.Passages)))
	st.BytesPerToken = float64(bytes) / float64(max(1, tok))
	byID := make(map[string]int, len(w.Passages))
	for i, p := range w.Passages {
		byID[p.ID] = i
	}
	r := newRand(w.Config.Seed, streamQuestions+1)
	var nPrompt, n1, n2, t1, t2 int
	for s := range NumSplits {
		st.Questions[s] = len(w.Splits[s])
		for _, q := range w.Splits[s] {
			if q.Hops == 2 {
				st.TwoHop[s]++
			}
			prompt, err := promptText(q.Question)
			if err != nil {
				return st, fmt.Errorf("question %s: %w", q.ID, err)
			}
			nPrompt += len(enc.Encode(prompt))
			hop := 0
			t, err := Script(q, func(string) []Passage {
				var docs []Passage
				if hop < len(q.GoldIDs) && len(q.GoldIDs[hop]) > 0 {
					docs = append(docs, w.Passages[byID[q.GoldIDs[hop][0]]])
				}
				for len(docs) < docsPerSearch && len(docs) < len(w.Passages) {
					p := w.Passages[r.IntN(len(w.Passages))]
					if !slices.ContainsFunc(docs, func(d Passage) bool { return d.ID == p.ID }) {
						docs = append(docs, p)
					}
				}
				hop++
				return docs
			}, agent.InfoCode)
			if err != nil {
				return st, err
			}
			n := len(enc.Encode(t.Text()))
			if q.Hops == 2 {
				t2 += n
				n2++
			} else {
				t1 += n
				n1++
			}
		}
	}
	total := n1 + n2
	st.TokensPrompt = float64(nPrompt) / float64(max(1, total))
	st.TokensSingle = float64(t1) / float64(max(1, n1))
	st.TokensTwoHop = float64(t2) / float64(max(1, n2))
	return st, nil
}

// StatsFor measures the world under its own trained tokenizer.
func (w *World) StatsFor(tok *bpe.Model, docsPerSearch int) (Stats, error) {
	return w.ComputeStats(tok, tok.VocabSize(), docsPerSearch)
}

// Print writes the stats as a short human-readable summary.
func (st Stats) Print(out io.Writer) {
	fmt.Fprintf(out, "entities %d, passages %d\n", st.Entities, st.Passages)
	for s := range NumSplits {
		fmt.Fprintf(out, "  %-9s %5d questions (%d single-hop, %d two-hop)\n", s, st.Questions[s], st.Questions[s]-st.TwoHop[s], st.TwoHop[s])
	}
	fmt.Fprintf(out, "tokenizer: %d tokens; %.1f tokens per passage (%.2f bytes per token)\n", st.VocabSize, st.TokensPassage, st.BytesPerToken)
	fmt.Fprintf(out, "scripted responses with %d docs per search: %.1f tokens single-hop, %.1f two-hop; prompt %.1f tokens\n",
		st.DocsPerSearch, st.TokensSingle, st.TokensTwoHop, st.TokensPrompt)
}
