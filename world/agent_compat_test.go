package world_test

import (
	"testing"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/world"
)

// TestDefaultInformationMatchesAgent keeps the scripted trajectories'
// information blocks identical to what the agent appends at rollout time.
func TestDefaultInformationMatchesAgent(t *testing.T) {
	docs := []world.Passage{
		{ID: "7", Title: "The Silent Harbor", Text: "The Silent Harbor is a 1987 drama film directed by Dalmor Keswin."},
		{ID: "3", Title: "Dalmor Keswin", Text: "Keswin was born in Tarsk in 1941."},
		{ID: "9", Title: "Tarsk", Text: "Tarsk is a city in Velmoria."},
	}
	for n := 0; n <= len(docs); n++ {
		var contents []string
		for _, d := range docs[:n] {
			contents = append(contents, d.Contents())
		}
		got, want := world.DefaultInformation(docs[:n]), agent.FormatInformation(contents, agent.InfoCode)
		if got != want {
			t.Errorf("%d docs:\n got %q\nwant %q", n, got, want)
		}
	}
}

// TestScriptedTrajectoriesScoreFull scores every scripted response of a
// small world with the agent's reward (paper Eq. 5): all are valid and exact
// matches, and each generated turn parses as the intended action.
func TestScriptedTrajectoriesScoreFull(t *testing.T) {
	w, err := world.Generate(world.SmallConfig(4))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]world.Passage{}
	for _, p := range w.Passages {
		byID[p.ID] = p
	}
	rc := agent.DefaultRewardConfig()
	n := 0
	for s := range world.NumSplits {
		for _, q := range w.Splits[s] {
			hop := 0
			tr, err := world.Script(q, func(string) []world.Passage {
				docs := []world.Passage{byID[q.GoldIDs[hop][0]], w.Passages[hop]}
				hop++
				return docs
			}, world.DefaultInformation)
			if err != nil {
				t.Fatal(err)
			}
			if o := rc.Score(tr.Text(), q.GoldenAnswers); o.Reward != 1 || !o.Valid || !o.EM {
				t.Fatalf("%s: reward %v (valid %v, EM %v) for\n%s", q.ID, o.Reward, o.Valid, o.EM, tr.Text())
			}
			searches := 0
			for _, seg := range tr.Segments {
				if seg.Retrieved {
					continue
				}
				act, arg := agent.ParseAction(seg.Text)
				switch act {
				case agent.ActionSearch:
					if arg != q.HopInfo[searches].Query {
						t.Errorf("%s: search %d is %q, want %q", q.ID, searches, arg, q.HopInfo[searches].Query)
					}
					searches++
				case agent.ActionAnswer:
					if arg != q.GoldenAnswers[0] {
						t.Errorf("%s: answer %q", q.ID, arg)
					}
				default:
					t.Errorf("%s: turn %q parses as %v", q.ID, seg.Text, act)
				}
			}
			if searches != q.Hops {
				t.Errorf("%s: %d searches for %d hops", q.ID, searches, q.Hops)
			}
			n++
		}
	}
	t.Logf("%d scripted responses score 1.0", n)
}
