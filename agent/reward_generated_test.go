package agent

import (
	"slices"
	"testing"
)

// TestScoreGenerated: by default the answer comes only from the text the
// policy generated (loss mask 1); the official code's whole-text rule
// (RewardConfig.AnswerFrom = AnswerFromText) also reads observations.
func TestScoreGenerated(t *testing.T) {
	paris := []string{"Paris"}
	info := "<information>Doc 1 (Title: Paris)\nThe capital is <answer>Paris</answer>.</information>"
	clean := "<information>Doc 1 (Title: Paris)\nThe capital is Paris.</information>"
	for _, tc := range []struct {
		name      string
		generated []string // policy-generated runs, in order; observations between them
		obs       []string // observation after each run but the last
		policy    float64  // reward, answer from the policy's text (default)
		whole     float64  // reward, whole-text rule (code)
		hasPolicy bool
	}{
		{"never answers, invalid-action message", []string{"<think>a</think>hmm", "<think>b</think>still thinking"},
			[]string{InvalidActionMessage}, 0, 0.1, false},
		{"passage holds the answer, policy never answers", []string{"<think>a</think><search>capital</search>", "<think>b</think>"},
			[]string{info}, 0, 0.8, false},
		{"passage holds the answer, policy answers wrong", []string{"<think>a</think><search>capital</search>", "<think>b</think><answer>Lyon</answer>"},
			[]string{clean}, 0.2, 0.2, true},
		{"passage's tags make the format invalid, the answer is the policy's", []string{"<think>a</think><search>capital</search>", "<think>b</think><answer>Lyon</answer>"},
			[]string{info}, 0.1, 0.1, true},
		{"policy answers right after a search", []string{"<think>a</think><search>capital</search>", "<think>b</think><answer> Paris </answer>"},
			[]string{clean}, 1.0, 1.0, true},
		{"policy answers right after an invalid turn", []string{"<think>a</think>I will answer now.", "<think>b</think><answer>Paris</answer>"},
			[]string{InvalidActionMessage}, 0.8, 0.8, true},
		{"tags split by an observation never pair", []string{"<think>a</think><answer>Par", "is</answer>"},
			[]string{InvalidActionMessage}, 0, 0.1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := ""
			for i, g := range tc.generated {
				resp += g
				if i < len(tc.obs) {
					resp += tc.obs[i]
				}
			}
			cfg := DefaultRewardConfig()
			o := cfg.ScoreGenerated(resp, tc.generated, paris)
			if o.Reward != tc.policy || o.HasAnswer != tc.hasPolicy {
				t.Errorf("policy's text: reward %v has answer %v (%q), want %v %v", o.Reward, o.HasAnswer, o.Answer, tc.policy, tc.hasPolicy)
			}
			cfg.AnswerFrom = AnswerFromText
			if o := cfg.ScoreGenerated(resp, tc.generated, paris); o.Reward != tc.whole || o != cfg.Score(resp, paris) {
				t.Errorf("whole text: reward %v (%q), want %v", o.Reward, o.Answer, tc.whole)
			}
		})
	}
}

func TestGeneratedRuns(t *testing.T) {
	for _, tc := range []struct {
		mask []uint8
		want [][2]int
	}{
		{nil, nil},
		{[]uint8{0, 0}, nil},
		{[]uint8{1, 1, 0, 0, 1}, [][2]int{{0, 2}, {4, 5}}},
		{[]uint8{0, 1, 1, 1, 0}, [][2]int{{1, 4}}},
	} {
		if got := generatedRuns(tc.mask); !slices.Equal(got, tc.want) {
			t.Errorf("generatedRuns(%v) = %v, want %v", tc.mask, got, tc.want)
		}
	}
}
