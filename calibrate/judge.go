package calibrate

import (
	"context"
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

// Normalize lowercases s and collapses every run of whitespace to one
// space, trimming the ends — the official code's answer matching (no
// punctuation or article removal, unlike the EM reward's normalisation).
func Normalize(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}
