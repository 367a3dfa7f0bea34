package world

import (
	"fmt"
	"slices"
	"strings"
)

// Segment is a piece of a scripted response: text the policy generates, or
// an information block the environment appends (excluded from the loss).
type Segment struct {
	Text      string
	Retrieved bool
}

// Trajectory is the ideal response to a question, as the supervised warm
// start trains on it.
type Trajectory struct {
	Segments []Segment
	// Queries are the searches made, one per hop.
	Queries []string
	// Found[h] reports whether hop h's retrieval returned a gold passage. A
	// trajectory whose hops were not all found answers from the script, not
	// from what it read; callers may prefer to drop it.
	Found []bool
}

// Text concatenates the segments: the full response.
func (t Trajectory) Text() string {
	var b strings.Builder
	for _, s := range t.Segments {
		b.WriteString(s.Text)
	}
	return b.String()
}

// AllFound reports whether every hop retrieved a gold passage.
func (t Trajectory) AllFound() bool { return !slices.Contains(t.Found, false) }

// Retriever returns the passages a query retrieves (already truncated, for
// instance by APS).
type Retriever func(query string) []Passage

// InformationRenderer renders retrieved passages as the block the
// environment appends after a search, tags and surrounding whitespace
// included. The agent package owns the real format; DefaultInformation is
// the official code's.
type InformationRenderer func(docs []Passage) string

// DefaultInformation renders the official CAS code's information block, as
// agent.FormatInformation does with its default format:
//
//	"<information>" + strip(Σ_i "Doc {i} (Title: {title})\n{text}\n\n") + "</information>"
//
// with i counted from 1.
func DefaultInformation(docs []Passage) string {
	var b strings.Builder
	for i, d := range docs {
		fmt.Fprintf(&b, "Doc %d (Title: %s)\n%s\n\n", i+1, d.Title, d.Text)
	}
	return "<information>" + strings.TrimSpace(b.String()) + "</information>"
}

// Script writes the ideal response to q: one search per hop, each followed
// by the retrieved information and a think block restating the fact found,
// then the answer (the first golden answer).
//
// Single-hop:
//
//	<think>I need to find the birthplace of X.</think>
//	<search>X born</search><information>…</information>
//	<think>X was born in Y.</think>
//	<answer>Y</answer>
//
// Two-hop: the first think names the first hop's need; the think after the
// first information block restates the bridge fact and names the second
// need; the second search uses the bridge entity's name. Policy-generated
// segments start with "\n" after an information block, and a search segment
// ends at "</search>", where generation stops.
func Script(q Question, retrieve Retriever, info InformationRenderer) (Trajectory, error) {
	if len(q.HopInfo) == 0 || len(q.HopInfo) != q.Hops {
		return Trajectory{}, fmt.Errorf("question %s: hops = %d but %d hop_info entries", q.ID, q.Hops, len(q.HopInfo))
	}
	if len(q.GoldenAnswers) == 0 {
		return Trajectory{}, fmt.Errorf("question %s: no golden answer", q.ID)
	}
	if info == nil {
		info = DefaultInformation
	}
	var t Trajectory
	think := "I need to find " + q.HopInfo[0].Need + "."
	if q.Hops > 1 {
		think = "I need to find " + q.HopInfo[0].Need + " first."
	}
	prefix := ""
	for h, hop := range q.HopInfo {
		t.Segments = append(t.Segments, Segment{Text: prefix + "<think>" + think + "</think>\n<search>" + hop.Query + "</search>"})
		docs := retrieve(hop.Query)
		t.Queries = append(t.Queries, hop.Query)
		t.Found = append(t.Found, containsGold(docs, q, h))
		t.Segments = append(t.Segments, Segment{Text: info(docs), Retrieved: true})
		prefix = "\n"
		think = hop.Statement
		if h+1 < len(q.HopInfo) {
			think += " Now I need to find " + q.HopInfo[h+1].Need + "."
		}
	}
	t.Segments = append(t.Segments, Segment{Text: "\n<think>" + think + "</think>\n<answer>" + q.GoldenAnswers[0] + "</answer>"})
	return t, nil
}

// containsGold reports whether docs include one of hop h's gold passages.
func containsGold(docs []Passage, q Question, h int) bool {
	if h >= len(q.GoldIDs) {
		return false
	}
	for _, d := range docs {
		if slices.Contains(q.GoldIDs[h], d.ID) {
			return true
		}
	}
	return false
}
