package world_test

import (
	"testing"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/world"
)

// TestScriptInformationIsTheAgents: a scripted response's information
// blocks are the agent's own rendering of the retrieved passages, in both
// formats, so the warm start trains on the bytes a rollout appends.
func TestScriptInformationIsTheAgents(t *testing.T) {
	w, err := world.Generate(world.SmallConfig(4))
	if err != nil {
		t.Fatal(err)
	}
	q := w.Splits[world.Train][0]
	docs := w.Passages[:3]
	contents := []string{docs[0].Contents(), docs[1].Contents(), docs[2].Contents()}
	for _, f := range []agent.InfoFormat{agent.InfoCode, agent.InfoSearchR1} {
		tr, err := world.Script(q, func(string) []world.Passage { return docs }, f)
		if err != nil {
			t.Fatal(err)
		}
		want, n := agent.FormatInformation(contents, f), 0
		for _, seg := range tr.Segments {
			if seg.Retrieved {
				n++
				if seg.Text != want {
					t.Errorf("%s: block %q, want %q", f, seg.Text, want)
				}
			}
		}
		if n != q.Hops {
			t.Errorf("%s: %d information blocks for %d hops", f, n, q.Hops)
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
			}, agent.InfoCode)
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
