package world

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cas-engine/cas/agent"
)

// Segment is a piece of a scripted response: text the policy generates, or
// an information block the environment appends (excluded from the loss).
type Segment struct {
	Text      string
	Retrieved bool
}

// ScriptedResponse is the ideal response to a question, as the supervised
// warm start trains on it (the demo turns it into an agent.Trajectory).
type ScriptedResponse struct {
	Segments []Segment
	// Queries are the searches made, one per hop.
	Queries []string
	// Found[h] reports whether hop h's retrieval returned a gold passage. A
	// trajectory whose hops were not all found answers from the script, not
	// from what it read; callers may prefer to drop it.
	Found []bool
}

// Text concatenates the segments: the full response.
func (t ScriptedResponse) Text() string {
	var b strings.Builder
	for _, s := range t.Segments {
		b.WriteString(s.Text)
	}
	return b.String()
}

// AllFound reports whether every hop retrieved a gold passage.
func (t ScriptedResponse) AllFound() bool { return !slices.Contains(t.Found, false) }

// Retriever returns the passages a query retrieves (already truncated, for
// instance by APS).
type Retriever func(query string) []Passage

// information renders retrieved passages as the block the agent appends
// after a search at rollout time (agent.FormatInformation in format f), so
// that a scripted response and a rollout see the same bytes.
func information(docs []Passage, f agent.InfoFormat) string {
	contents := make([]string, len(docs))
	for i, d := range docs {
		contents[i] = d.Contents()
	}
	return agent.FormatInformation(contents, f)
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
func Script(q Question, retrieve Retriever, info agent.InfoFormat) (ScriptedResponse, error) {
	return ScriptSearches(q, q.Hops, retrieve, info)
}

// ScriptSearches is Script with only the first searches hops searched
// (0 ≤ searches ≤ q.Hops): the response of an agent that answers from
// memory before it has looked everything up, as an instruct model often
// does. With 0 it names the first need and answers at once:
//
//	<think>I need to find the birthplace of X.</think>
//	<answer>Y</answer>
//
// With 1 of 2 hops it searches the first hop, restates the bridge fact
// and answers without the second search:
//
//	<think>I need to find the director of F first.</think>
//	<search>F director</search><information>…</information>
//	<think>F was directed by D.</think>
//	<answer>Z</answer>
//
// The answer is always the golden one (for a training question the
// memorised fact). Each departure from Script happens at a single token
// — "<answer>" instead of "<search>", or "</think>" instead of " Now I
// need…" — so that the choice to search is one decision a policy can
// learn from reward.
func ScriptSearches(q Question, searches int, retrieve Retriever, info agent.InfoFormat) (ScriptedResponse, error) {
	if len(q.HopInfo) == 0 || len(q.HopInfo) != q.Hops {
		return ScriptedResponse{}, fmt.Errorf("question %s: hops = %d but %d hop_info entries", q.ID, q.Hops, len(q.HopInfo))
	}
	if len(q.GoldenAnswers) == 0 {
		return ScriptedResponse{}, fmt.Errorf("question %s: no golden answer", q.ID)
	}
	if searches < 0 || searches > q.Hops {
		return ScriptedResponse{}, fmt.Errorf("question %s: %d searches for %d hops", q.ID, searches, q.Hops)
	}
	var t ScriptedResponse
	think := "I need to find " + q.HopInfo[0].Need + "."
	if q.Hops > 1 {
		think = "I need to find " + q.HopInfo[0].Need + " first."
	}
	prefix := ""
	for h, hop := range q.HopInfo[:searches] {
		t.Segments = append(t.Segments, Segment{Text: prefix + "<think>" + think + "</think>\n<search>" + hop.Query + "</search>"})
		docs := retrieve(hop.Query)
		t.Queries = append(t.Queries, hop.Query)
		t.Found = append(t.Found, containsGold(docs, q, h))
		t.Segments = append(t.Segments, Segment{Text: information(docs, info), Retrieved: true})
		prefix = "\n"
		think = hop.Statement
		if h+1 < searches {
			think += " Now I need to find " + q.HopInfo[h+1].Need + "."
		}
	}
	t.Segments = append(t.Segments, Segment{Text: prefix + "<think>" + think + "</think>\n<answer>" + q.GoldenAnswers[0] + "</answer>"})
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
