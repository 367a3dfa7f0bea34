package agent

import (
	"encoding"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/internal/wanterr"
)

// TestEnumText: every setting enum encodes to its flag spelling and decodes
// back (YAML configs and JSON reports go through these), and a bad name is
// an error that names it.
func TestEnumText(t *testing.T) {
	cases := []struct {
		v    encoding.TextMarshaler
		back encoding.TextUnmarshaler
		want string
	}{
		{ModeAgent, new(Mode), "agent"}, {ModeDirect, new(Mode), "direct"}, {ModeRAG, new(Mode), "rag"},
		{TurnsPaper, new(TurnRule), "paper"}, {TurnsCode, new(TurnRule), "code"},
		{PlacementSystemUser, new(Placement), "system-user"}, {PlacementUserOnly, new(Placement), "user"},
		{InfoCode, new(InfoFormat), "code"}, {InfoSearchR1, new(InfoFormat), "search-r1"},
		{AnswerFromPolicy, new(AnswerSource), "policy"}, {AnswerFromText, new(AnswerSource), "text"},
	}
	for _, c := range cases {
		b, err := c.v.MarshalText()
		if err != nil || string(b) != c.want {
			t.Errorf("%v: MarshalText %q, %v; want %q", c.v, b, err, c.want)
		}
		if err := c.back.UnmarshalText(b); err != nil {
			t.Errorf("%s: %v", b, err)
		}
		if got, _ := c.back.(encoding.TextMarshaler).MarshalText(); string(got) != c.want {
			t.Errorf("%s decoded to %s", c.want, got)
		}
		wanterr.Check(t, fmt.Sprintf("%T.UnmarshalText(bogus)", c.back), c.back.UnmarshalText([]byte("bogus")), "bogus")
	}
}

// TestRolloutConfigJSON: the settings an evaluation report records decode
// back to the same configuration, APS calibration included.
func TestRolloutConfigJSON(t *testing.T) {
	c := DefaultRolloutConfig()
	c.TurnRule, c.Placement, c.Info, c.Reward.AnswerFrom = TurnsCode, PlacementUserOnly, InfoSearchR1, AnswerFromText
	c.SetAPS(conformal.APS{Temperature: 1, MinDocs: 1, MaxDocs: 5}, 0.9)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"turn_rule":"code"`, `"placement":"user"`, `"info_format":"search-r1"`, `"answer_from":"text"`, `"qhat":0.9`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}
	var back RolloutConfig
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	back.RetrieveAttempts, back.RetrieveTimeout, back.RetryBackoff, back.CompactBelow = c.RetrieveAttempts, c.RetrieveTimeout, c.RetryBackoff, c.CompactBelow
	if back.APS == nil || back.APS.QHatLog != c.APS.QHatLog || back.TurnRule != c.TurnRule || back.Reward != c.Reward || back.Info != c.Info {
		t.Errorf("round trip: %+v\nwant %+v", back, c)
	}
}

// TestConfidenceScore: the one ACI score (Eq. 6) of rollout, learner and
// bootstrap, by hand. Response log-probs −1, −2, [−9 −9 retrieved], −3, −4.
func TestConfidenceScore(t *testing.T) {
	lps := []float32{-1, -2, -9, -9, -3, -4}
	mask := []uint8{1, 1, 0, 0, 1, 1}
	cases := []struct {
		name string
		span [2]int
		want float64
	}{
		{"answer span after the observation", [2]int{4, 6}, 3.5},
		{"answer span across the observation skips it", [2]int{1, 5}, 2.5},
		{"no span: every generated token", [2]int{0, 0}, 2.5},
		{"empty span", [2]int{3, 3}, 2.5},
		{"span past the end is clipped", [2]int{5, 9}, 4},
	}
	for _, c := range cases {
		if got := ConfidenceScore(lps, mask, c.span); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := ConfidenceScore(lps, nil, [2]int{0, 2}); got != 1.5 {
		t.Errorf("nil mask: %v, want 1.5", got)
	}
	if got := ConfidenceScore(nil, []uint8{}, [2]int{}); got != conformal.EmptyNLL {
		t.Errorf("empty response: %v", got)
	}
	tr := &Trajectory{IDs: make([]int, 8), PromptLen: 2, Mask: append([]uint8{0, 0}, mask...),
		LogProbs: append([]float32{0, 0}, lps...), AnswerSpan: [2]int{4, 6}}
	if got := tr.AnswerNLL(); got != 3.5 {
		t.Errorf("Trajectory.AnswerNLL %v, want 3.5", got)
	}
}
