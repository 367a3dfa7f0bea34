package train

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/graph"
)

// AdvantageEpsilon is the ε of the GRPO advantage's denominator.
const AdvantageEpsilon = 1e-6

// GroupAdvantages computes GRPO's group-relative advantages of rewards laid
// out as consecutive groups of groupSize trajectories of the same prompt:
//
//	A_i = (R_i − mean_g(R)) / (std_g(R) + ε),   ε = 1e-6,
//	std_g = sqrt( Σ_{j∈g} (R_j − mean_g)² / (|g| − 1) )   (unbiased),
//
// and A_i = 0 for a group of one. The arithmetic is float64; the result is
// rounded to float32, the dtype of the loss graph. The advantage of a
// trajectory is broadcast over all its response tokens by the loss.
func GroupAdvantages(rewards []float32, groupSize int) ([]float32, error) {
	if groupSize < 1 {
		return nil, fmt.Errorf("advantages: group size %d < 1", groupSize)
	}
	if len(rewards)%groupSize != 0 {
		return nil, fmt.Errorf("advantages: %d rewards are not whole groups of %d", len(rewards), groupSize)
	}
	ids := make([]int, len(rewards))
	for i := range ids {
		ids[i] = i / groupSize
	}
	return GroupAdvantagesByID(rewards, ids)
}

// GroupAdvantagesByID is GroupAdvantages for groups given by an id per
// trajectory (verl's uid), in any order and of any sizes; the formula is the
// same, with |g| the size of each group.
func GroupAdvantagesByID(rewards []float32, groups []int) ([]float32, error) {
	if len(rewards) != len(groups) {
		return nil, fmt.Errorf("advantages: %d rewards but %d group ids", len(rewards), len(groups))
	}
	type acc struct {
		n        int
		sum, ssq float64
	}
	stats := map[int]*acc{}
	for i, r := range rewards {
		if math.IsNaN(float64(r)) || math.IsInf(float64(r), 0) {
			return nil, fmt.Errorf("advantages: reward %d is %v", i, r)
		}
		a := stats[groups[i]]
		if a == nil {
			a = &acc{}
			stats[groups[i]] = a
		}
		a.n++
		a.sum += float64(r)
	}
	for i, r := range rewards {
		a := stats[groups[i]]
		d := float64(r) - a.sum/float64(a.n)
		a.ssq += d * d
	}
	out := make([]float32, len(rewards))
	for i, r := range rewards {
		a := stats[groups[i]]
		if a.n < 2 {
			continue // a group of one has no relative signal: A = 0
		}
		std := math.Sqrt(a.ssq / float64(a.n-1))
		out[i] = float32((float64(r) - a.sum/float64(a.n)) / (std + AdvantageEpsilon))
	}
	return out, nil
}

// GroupAdvantagesGraph is GroupAdvantages inside a graph: rewards [B] with
// B a multiple of groupSize, consecutive groups; returns A [B] in the
// rewards' dtype (zeros when groupSize is 1). No gradient flows through it.
//
//	A_i = (R_i − mean_g) / (sqrt(Σ_g (R_j − mean_g)² / (G − 1)) + ε)
func GroupAdvantagesGraph(rewards *graph.Node, groupSize int) *graph.Node {
	if rewards.Rank() != 1 || groupSize < 1 || rewards.Shape().Dimensions[0]%groupSize != 0 {
		panic(fmt.Sprintf("GroupAdvantagesGraph: rewards %s are not whole groups of %d", rewards.Shape(), groupSize))
	}
	rewards = graph.StopGradient(rewards)
	if groupSize == 1 {
		return graph.ZerosLike(rewards)
	}
	b := rewards.Shape().Dimensions[0]
	r := graph.Reshape(rewards, b/groupSize, groupSize)                                   // [B/G, G]
	centered := graph.Sub(r, graph.ReduceAndKeep(r, graph.ReduceMean, -1))                // [B/G, G]
	variance := graph.DivScalar(graph.ReduceSum(graph.Square(centered), -1), groupSize-1) // [B/G]
	std := graph.InsertAxes(graph.Sqrt(variance), -1)                                     // [B/G, 1]
	adv := graph.Div(centered, graph.BroadcastToDims(graph.AddScalar(std, AdvantageEpsilon), b/groupSize, groupSize))
	return graph.Reshape(adv, b) // [B]
}
