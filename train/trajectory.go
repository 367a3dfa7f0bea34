package train

import (
	"fmt"
	"math"

	"github.com/cas-engine/cas/agent"
)

// The learner trains on agent.Trajectory, the rollout's own record: its
// Question is the GRPO group (the G trajectories of a prompt share it),
// IDs the prompt followed by the response, Mask the loss mask (1 on tokens
// the policy generated; 0 on the prompt and on retrieved information
// blocks, which are never in the loss), LogProbs log π_old as sampled (may
// be nil when LearnerConfig.RecomputeOldLogProbs), AnswerSpan the answer's
// response positions for the ACI score and Outcome.Reward the reward of
// Eq. 5. A supervised warm-start example is the same record with IDs,
// PromptLen and Mask set.

// checkTrajectory checks a trajectory's internal consistency against a
// vocabulary size; needOld says whether its log-probs must be present.
func checkTrajectory(t *agent.Trajectory, vocab int, needOld bool) error {
	switch {
	case t.PromptLen < 1:
		return fmt.Errorf("prompt length %d < 1", t.PromptLen)
	case len(t.IDs) < t.PromptLen:
		return fmt.Errorf("%d tokens, fewer than the prompt's %d", len(t.IDs), t.PromptLen)
	case len(t.Mask) != len(t.IDs):
		return fmt.Errorf("loss mask has %d entries for %d tokens", len(t.Mask), len(t.IDs))
	case needOld && len(t.LogProbs) != len(t.IDs):
		return fmt.Errorf("%d old log-probs for %d tokens", len(t.LogProbs), len(t.IDs))
	case math.IsNaN(t.Outcome.Reward) || math.IsInf(t.Outcome.Reward, 0):
		return fmt.Errorf("reward is %v", t.Outcome.Reward)
	}
	for i, m := range t.Mask {
		if m > 1 || (m == 1 && i < t.PromptLen) {
			return fmt.Errorf("loss mask %d at token %d (want 0 on the prompt's %d tokens, 0 or 1 after)", m, i, t.PromptLen)
		}
	}
	for i, id := range t.IDs {
		if id < 0 || id >= vocab {
			return fmt.Errorf("token %d: id %d outside the vocabulary [0, %d)", i, id, vocab)
		}
	}
	return nil
}
