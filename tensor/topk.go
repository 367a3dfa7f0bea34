package tensor

import (
	"math"
	"sort"
)

// TopK keeps the k best (score, id) pairs of a stream: highest score first,
// equal scores ordered by smaller id, so the result does not depend on the
// order in which pairs arrive (or on how a search was split over
// goroutines). NaN scores are ignored. It is a binary min-heap whose root is
// the worst kept pair: each pushed pair costs one comparison unless it
// enters, then O(log k).
type TopK struct {
	k      int
	scores []float32
	ids    []int64
}

// NewTopK returns an empty selection of capacity k (k ≤ 0 keeps nothing).
func NewTopK(k int) *TopK {
	k = max(k, 0)
	return &TopK{k: k, scores: make([]float32, 0, k), ids: make([]int64, 0, k)}
}

// Reset empties the selection, keeping k and the storage.
func (t *TopK) Reset() {
	t.scores = t.scores[:0]
	t.ids = t.ids[:0]
}

// K is the capacity; Len the number of pairs kept (≤ K).
func (t *TopK) K() int   { return t.k }
func (t *TopK) Len() int { return len(t.scores) }

// worse reports whether (s1, i1) ranks below (s2, i2).
func worse(s1 float32, i1 int64, s2 float32, i2 int64) bool {
	return s1 < s2 || (s1 == s2 && i1 > i2)
}

// Push offers one pair.
func (t *TopK) Push(score float32, id int64) {
	if score != score { // NaN
		return
	}
	if len(t.scores) < t.k {
		t.scores = append(t.scores, score)
		t.ids = append(t.ids, id)
		t.up(len(t.scores) - 1)
		return
	}
	if t.k == 0 || !worse(t.scores[0], t.ids[0], score, id) {
		return
	}
	t.scores[0], t.ids[0] = score, id
	t.down(0)
}

// PushRows offers scores[j] with id first+j for every j.
func (t *TopK) PushRows(scores []float32, first int64) { t.push(scores, first, nil) }

// PushIDs offers scores[j] with id ids[j] for every j.
func (t *TopK) PushIDs(scores []float32, ids []int64) { t.push(scores, 0, ids[:len(scores)]) }

// push offers scores[j] with id ids[j], or first+j when ids is nil.
func (t *TopK) push(scores []float32, first int64, ids []int64) {
	idOf := func(j int) int64 {
		if ids != nil {
			return ids[j]
		}
		return first + int64(j)
	}
	j := 0
	for ; j < len(scores) && len(t.scores) < t.k; j++ {
		t.Push(scores[j], idOf(j))
	}
	if t.k == 0 || j == len(scores) {
		return
	}
	thr := t.scores[0]
	for {
		// Skip to the next score that can enter: ≥ the worst kept
		// (ordered, so NaN never does), 16 compared at once where the CPU
		// can. Most scores of a large scan stop here.
		j += IndexAtLeast(scores[j:], thr)
		if j == len(scores) {
			return
		}
		s, id := scores[j], idOf(j)
		j++
		if s == thr && id > t.ids[0] {
			continue
		}
		t.scores[0], t.ids[0] = s, id
		t.down(0)
		thr = t.scores[0]
	}
}

// IndexAtLeast returns the smallest j with x[j] ≥ thr, or len(x) when
// there is none; NaN is never ≥ anything. On AVX-512 it compares 64 values
// a step.
func IndexAtLeast(x []float32, thr float32) int {
	j := indexGEBlocks(x, thr)
	for ; j < len(x); j++ {
		if x[j] >= thr {
			return j
		}
	}
	return len(x)
}

// Merge offers every pair kept by o.
func (t *TopK) Merge(o *TopK) {
	for i, s := range o.scores {
		t.Push(s, o.ids[i])
	}
}

// Threshold returns the score a new pair must reach to enter: the worst kept
// score when full, −Inf otherwise.
func (t *TopK) Threshold() float32 {
	if len(t.scores) < t.k || t.k == 0 {
		return float32(math.Inf(-1))
	}
	return t.scores[0]
}

// Sorted writes the kept pairs best first into scores and ids (each at
// least Len long) and returns how many it wrote. The selection stays valid
// for more pushes.
func (t *TopK) Sorted(scores []float32, ids []int64) int {
	n := len(t.scores)
	// Worst first: an array sorted that way is still a valid min-heap.
	sort.Sort(worstFirst{t})
	for i := range n {
		scores[i], ids[i] = t.scores[n-1-i], t.ids[n-1-i]
	}
	return n
}

type worstFirst struct{ t *TopK }

func (b worstFirst) Len() int { return len(b.t.scores) }
func (b worstFirst) Less(i, j int) bool {
	return worse(b.t.scores[i], b.t.ids[i], b.t.scores[j], b.t.ids[j])
}
func (b worstFirst) Swap(i, j int) {
	b.t.scores[i], b.t.scores[j] = b.t.scores[j], b.t.scores[i]
	b.t.ids[i], b.t.ids[j] = b.t.ids[j], b.t.ids[i]
}

func (t *TopK) up(i int) {
	s, id := t.scores[i], t.ids[i]
	for i > 0 {
		p := (i - 1) / 2
		if !worse(s, id, t.scores[p], t.ids[p]) {
			break
		}
		t.scores[i], t.ids[i] = t.scores[p], t.ids[p]
		i = p
	}
	t.scores[i], t.ids[i] = s, id
}

func (t *TopK) down(i int) {
	n := len(t.scores)
	s, id := t.scores[i], t.ids[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && worse(t.scores[r], t.ids[r], t.scores[c], t.ids[c]) {
			c = r
		}
		if !worse(t.scores[c], t.ids[c], s, id) {
			break
		}
		t.scores[i], t.ids[i] = t.scores[c], t.ids[c]
		i = c
	}
	t.scores[i], t.ids[i] = s, id
}

// TopKIndices returns the indices of the k largest values of x, largest
// first, ties by smaller index (NaNs never selected; fewer than k when x is
// shorter or holds NaNs).
func TopKIndices(x []float32, k int) []int {
	t := NewTopK(min(k, len(x)))
	t.PushRows(x, 0)
	s := make([]float32, t.Len())
	ids := make([]int64, t.Len())
	n := t.Sorted(s, ids)
	out := make([]int, n)
	for i := range out {
		out[i] = int(ids[i])
	}
	return out
}
