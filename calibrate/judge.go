package calibrate

import (
	"context"
	"fmt"
	"strings"

	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
)

// Judge labels the gold passage of a question among its retrieved hits
// (in retrieval order). It returns the hit's index, or −1 when none is gold.
// The paper uses an LLM judge; ContainsJudge is the official code's
// fallback. A judge may call a model, hence the context and the error.
type Judge interface {
	Gold(ctx context.Context, q qa.Record, hits []search.Hit) (int, error)
}

// ContainsJudge marks the first hit whose contents contain a gold answer,
// both normalised by Normalize (the official code's fallback without an LLM
// judge). Empty answers never match.
type ContainsJudge struct{}

// Gold implements Judge.
func (ContainsJudge) Gold(_ context.Context, q qa.Record, hits []search.Hit) (int, error) {
	answers := make([]string, 0, len(q.Answers))
	for _, a := range q.Answers {
		if n := Normalize(a); n != "" {
			answers = append(answers, n)
		}
	}
	for i, h := range hits {
		c := Normalize(h.Doc.Contents)
		for _, a := range answers {
			if strings.Contains(c, a) {
				return i, nil
			}
		}
	}
	return -1, nil
}

// GoldIDJudge is an exact judge for a corpus whose gold passages are
// known, as the synthetic world's are: it maps a question id to the ids of
// its gold passages and marks the first hit among them.
type GoldIDJudge map[string]map[string]bool

// Gold implements Judge.
func (j GoldIDJudge) Gold(_ context.Context, q qa.Record, hits []search.Hit) (int, error) {
	gold, ok := j[q.ID]
	if !ok {
		return -1, fmt.Errorf("gold-id judge: no gold passages for question %q", q.ID)
	}
	for i, h := range hits {
		if gold[h.Doc.ID] {
			return i, nil
		}
	}
	return -1, nil
}

// String names the judge in reports.
func (GoldIDJudge) String() string { return "gold-ids" }

// Normalize lowercases s and collapses every run of whitespace to one
// space, trimming the ends — the official code's answer matching (no
// punctuation or article removal, unlike the EM reward's normalisation).
func Normalize(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}
