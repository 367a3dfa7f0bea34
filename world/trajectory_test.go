package world

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/cas-engine/cas/agent"
)

// validResponse is METHOD.md's format rule: <think>…</think>, then any number
// of (<search>…</search> <information>…</information> <think>…</think>),
// then <answer>…</answer>, with only whitespace between tags.
var validResponse = regexp.MustCompile(`^\s*<think>[^<]*</think>\s*(<search>[^<]*</search>\s*<information>(?s:.*?)</information>\s*<think>[^<]*</think>\s*)*<answer>[^<]*</answer>\s*$`)

// goldRetriever returns, for each hop in turn, the hop's gold passages plus
// extra distractors.
func goldRetriever(w *World, q Question, extra int) Retriever {
	byID := passageByID(w)
	hop := 0
	return func(query string) []Passage {
		var docs []Passage
		if hop < len(q.GoldIDs) && query == q.HopInfo[hop].Query {
			for _, id := range q.GoldIDs[hop] {
				docs = append(docs, byID[id])
			}
		}
		docs = append(docs, w.Passages[:extra]...)
		hop++
		return docs
	}
}

func TestScriptShape(t *testing.T) {
	w := mustSmall(t)
	seen := map[int]bool{}
	for s := range NumSplits {
		for _, q := range w.Splits[s] {
			tr, err := Script(q, goldRetriever(w, q, 2), agent.InfoCode)
			if err != nil {
				t.Fatal(err)
			}
			text := tr.Text()
			if !validResponse.MatchString(text) {
				t.Fatalf("%s: invalid response format:\n%s", q.ID, text)
			}
			if got := strings.Count(text, "<search>"); got != q.Hops || len(tr.Queries) != q.Hops {
				t.Errorf("%s: %d searches for %d hops", q.ID, got, q.Hops)
			}
			if !tr.AllFound() {
				t.Errorf("%s: gold retriever not recognised as found: %v", q.ID, tr.Found)
			}
			if want := "<answer>" + q.GoldenAnswers[0] + "</answer>"; !strings.HasSuffix(text, want) {
				t.Errorf("%s: response does not end in %s", q.ID, want)
			}
			// Segments alternate policy text and retrieved blocks; policy
			// segments before a retrieval stop at </search>.
			retrieved := 0
			for i, seg := range tr.Segments {
				if seg.Retrieved {
					retrieved++
					if !strings.HasPrefix(seg.Text, "<information>") || i == 0 || !strings.HasSuffix(tr.Segments[i-1].Text, "</search>") {
						t.Errorf("%s: segment %d misplaced", q.ID, i)
					}
				} else if strings.Contains(seg.Text, "<information>") {
					t.Errorf("%s: policy segment %d holds retrieved text", q.ID, i)
				}
			}
			if retrieved != q.Hops {
				t.Errorf("%s: %d retrieved segments", q.ID, retrieved)
			}
			// The last think restates the final fact with the answer.
			if last := tr.Segments[len(tr.Segments)-1].Text; !strings.Contains(last, q.HopInfo[q.Hops-1].Statement) {
				t.Errorf("%s: last think %q lacks %q", q.ID, last, q.HopInfo[q.Hops-1].Statement)
			}
			seen[q.Hops] = true
		}
	}
	if !seen[1] || !seen[2] {
		t.Fatalf("hop counts seen: %v", seen)
	}
}

// firstTwoHop returns the first two-hop question of w's test split.
func firstTwoHop(t *testing.T, w *World) Question {
	t.Helper()
	for _, q := range w.Splits[Test] {
		if q.Hops == 2 {
			return q
		}
	}
	t.Fatal("no two-hop question in the test split")
	return Question{}
}

func TestScriptReportsMissingGold(t *testing.T) {
	w := mustSmall(t)
	q := firstTwoHop(t, w)
	// Only the first hop finds its gold passage.
	byID := passageByID(w)
	calls := 0
	tr, err := Script(q, func(string) []Passage {
		calls++
		if calls == 1 {
			return []Passage{byID[q.GoldIDs[0][0]]}
		}
		return nil
	}, agent.InfoSearchR1)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Found) != 2 || !tr.Found[0] || tr.Found[1] || tr.AllFound() {
		t.Errorf("Found = %v, want [true false]", tr.Found)
	}
	one := agent.FormatInformation([]string{byID[q.GoldIDs[0][0]].Contents()}, agent.InfoSearchR1)
	if !strings.Contains(tr.Text(), one) || !strings.Contains(tr.Text(), agent.FormatInformation(nil, agent.InfoSearchR1)) {
		t.Errorf("the information format asked for was not used:\n%s", tr.Text())
	}
}

func TestScriptRejectsMalformedQuestions(t *testing.T) {
	tests := []struct {
		name string
		q    Question
	}{
		{"no hops", Question{ID: "a", GoldenAnswers: []string{"x"}, Hops: 1}},
		{"hop count mismatch", Question{ID: "b", GoldenAnswers: []string{"x"}, Hops: 2, HopInfo: []Hop{{}}}},
		{"no answer", Question{ID: "c", Hops: 1, HopInfo: []Hop{{}}}},
	}
	for _, tc := range tests {
		if _, err := Script(tc.q, func(string) []Passage { return nil }, agent.InfoCode); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func ExampleScript() {
	q := Question{
		ID: "test_0", Question: "Where was the director of The Silent Harbor born?",
		GoldenAnswers: []string{"Tarsk"}, Hops: 2, Type: "bridge",
		GoldIDs: [][]string{{"7"}, {"3"}},
		HopInfo: []Hop{
			{Subject: "The Silent Harbor", Relation: "directed_by", Answer: "Dalmor Keswin", Query: "The Silent Harbor directed",
				Need: "the director of The Silent Harbor", Statement: "The Silent Harbor was directed by Dalmor Keswin."},
			{Subject: "Dalmor Keswin", Relation: "born_in", Answer: "Tarsk", Query: "Dalmor Keswin born",
				Need: "the birthplace of Dalmor Keswin", Statement: "Dalmor Keswin was born in Tarsk."},
		},
	}
	corpus := map[string]Passage{
		"The Silent Harbor directed": {ID: "7", Title: "The Silent Harbor", Text: "The Silent Harbor is a 1987 drama film directed by Dalmor Keswin."},
		"Dalmor Keswin born":         {ID: "3", Title: "Dalmor Keswin", Text: "Keswin was born in Tarsk in 1941."},
	}
	tr, _ := Script(q, func(query string) []Passage { return []Passage{corpus[query]} }, agent.InfoCode)
	fmt.Println(tr.Text())
	fmt.Println(tr.Found)
	// Output:
	// <think>I need to find the director of The Silent Harbor first.</think>
	// <search>The Silent Harbor directed</search><information>Doc 1 (Title: The Silent Harbor)
	// The Silent Harbor is a 1987 drama film directed by Dalmor Keswin.</information>
	// <think>The Silent Harbor was directed by Dalmor Keswin. Now I need to find the birthplace of Dalmor Keswin.</think>
	// <search>Dalmor Keswin born</search><information>Doc 1 (Title: Dalmor Keswin)
	// Keswin was born in Tarsk in 1941.</information>
	// <think>Dalmor Keswin was born in Tarsk.</think>
	// <answer>Tarsk</answer>
	// [true true]
}

// TestScriptSearchesAnswersEarly checks the demonstrations that answer
// before every hop is searched: they share Script's text up to the one
// token where they depart from it ("<answer>" for "<search>", "</think>"
// for " Now I need…"), then answer with the golden answer.
func TestScriptSearchesAnswersEarly(t *testing.T) {
	w := mustSmall(t)
	q := firstTwoHop(t, w)
	full, err := Script(q, goldRetriever(w, q, 2), agent.InfoCode)
	if err != nil {
		t.Fatal(err)
	}
	answer := "</think>\n<answer>" + q.GoldenAnswers[0] + "</answer>"
	tests := []struct {
		searches int
		// common is the full script's prefix the early answer keeps.
		common string
	}{
		{0, "<think>I need to find " + q.HopInfo[0].Need + " first."},
		{1, full.Segments[0].Text + full.Segments[1].Text + "\n<think>" + q.HopInfo[0].Statement},
		{2, strings.TrimSuffix(full.Text(), answer)},
	}
	for _, tc := range tests {
		tr, err := ScriptSearches(q, tc.searches, goldRetriever(w, q, 2), agent.InfoCode)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := tr.Text(), tc.common+answer; got != want {
			t.Errorf("%d searches:\n got %q\nwant %q", tc.searches, got, want)
		}
		if len(tr.Queries) != tc.searches || len(tr.Found) != tc.searches || !tr.AllFound() {
			t.Errorf("%d searches: queries %v, found %v", tc.searches, tr.Queries, tr.Found)
		}
		if !strings.HasPrefix(full.Text(), tc.common) {
			t.Errorf("%d searches: %q is not a prefix of the full script", tc.searches, tc.common)
		}
	}
	for _, n := range []int{-1, 3} {
		if _, err := ScriptSearches(q, n, goldRetriever(w, q, 2), agent.InfoCode); err == nil {
			t.Errorf("%d searches for 2 hops: no error", n)
		}
	}
}
