package bpe

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// AddedToken is a string matched whole before pre-tokenization (a chat or
// agent tag). Special tokens are dropped by Decode(…, skipSpecial=true).
type AddedToken struct {
	Content string
	Special bool
}

// Trainer accumulates word counts from text.
type Trainer struct {
	added  []AddedToken
	counts map[string]int // pre-tokenized word → weighted count (lookups and a sorted dump only)
}

// NewTrainer returns a trainer whose texts have the added tokens split out
// (they are never merged into or across).
func NewTrainer(added []AddedToken) *Trainer {
	return &Trainer{added: slices.Clone(added), counts: map[string]int{}}
}

// Add counts the words of text, weight times each.
func (t *Trainer) Add(text string, weight int) {
	splitAdded(text, t.added, func(piece string, tok int) {
		if tok >= 0 {
			return
		}
		SplitWords(piece, func(w string) { t.counts[w] += weight })
	})
}

// Words returns the number of distinct pre-tokenized words seen.
func (t *Trainer) Words() int { return len(t.counts) }

// splitAdded cuts s at every occurrence of an added token (the longest one
// where several start at the same position, the earliest position first),
// calling fn(piece, -1) for the text between and fn(content, k) for the k-th
// added token.
func splitAdded(s string, added []AddedToken, fn func(piece string, tok int)) {
	for len(s) > 0 {
		best, bestAt := -1, len(s)
		for k, a := range added {
			if a.Content == "" {
				continue
			}
			at := strings.Index(s[:min(len(s), bestAt+len(a.Content))], a.Content)
			if at < 0 {
				continue
			}
			if at < bestAt || (at == bestAt && len(a.Content) > len(added[best].Content)) {
				best, bestAt = k, at
			}
		}
		if best < 0 {
			fn(s, -1)
			return
		}
		if bestAt > 0 {
			fn(s[:bestAt], -1)
		}
		fn(added[best].Content, best)
		s = s[bestAt+len(added[best].Content):]
	}
}

type pair [2]int

// Train learns merges until the vocabulary (256 bytes + merges + added
// tokens) has vocabSize entries or the most frequent pair occurs fewer than
// minFrequency times.
func (t *Trainer) Train(vocabSize, minFrequency int) (*Model, error) {
	target := vocabSize - len(t.added) // bytes + merged tokens
	if target < 256 {
		return nil, fmt.Errorf("bpe: vocab size %d is below 256 bytes + %d added tokens", vocabSize, len(t.added))
	}
	if len(t.counts) == 0 {
		return nil, errors.New("bpe: no training text")
	}
	minFrequency = max(1, minFrequency)

	m := newModel(t.added)
	// Words in sorted order: indices, and so every later step, are
	// independent of map iteration order.
	keys := make([]string, 0, len(t.counts))
	for k := range t.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	words := make([][]int, len(keys))
	freq := make([]int, len(keys))
	counts := map[pair]int{}
	where := map[pair][]int{}
	for wi, k := range keys {
		syms := make([]int, len(k))
		for i := 0; i < len(k); i++ {
			syms[i] = int(k[i])
		}
		words[wi], freq[wi] = syms, t.counts[k]
		for i := 0; i+1 < len(syms); i++ {
			p := pair{syms[i], syms[i+1]}
			counts[p] += freq[wi]
			where[p] = append(where[p], wi)
		}
	}
	stamp := make([]int, len(words))
	for it := 1; len(m.Vocab) < target; it++ {
		best, bestN := pair{}, 0
		for p, n := range counts {
			if n > bestN || (n == bestN && m.pairLess(p, best)) {
				best, bestN = p, n
			}
		}
		if bestN < minFrequency || bestN == 0 {
			break
		}
		id := m.addMerge(best)
		for _, wi := range where[best] {
			if stamp[wi] == it {
				continue
			}
			stamp[wi] = it
			syms := words[wi]
			if !hasPair(syms, best) {
				continue
			}
			f := freq[wi]
			for i := 0; i+1 < len(syms); i++ {
				p := pair{syms[i], syms[i+1]}
				if counts[p] -= f; counts[p] <= 0 {
					delete(counts, p)
				}
			}
			syms = mergePair(syms, best, id)
			words[wi] = syms
			for i := 0; i+1 < len(syms); i++ {
				p := pair{syms[i], syms[i+1]}
				counts[p] += f
				where[p] = append(where[p], wi)
			}
		}
		delete(counts, best)
		delete(where, best)
	}
	return m, nil
}

func hasPair(syms []int, p pair) bool {
	for i := 0; i+1 < len(syms); i++ {
		if syms[i] == p[0] && syms[i+1] == p[1] {
			return true
		}
	}
	return false
}

// mergePair replaces every non-overlapping occurrence of p, left to right,
// by id (in place).
func mergePair(syms []int, p pair, id int) []int {
	out := syms[:0]
	for i := 0; i < len(syms); i++ {
		if i+1 < len(syms) && syms[i] == p[0] && syms[i+1] == p[1] {
			out = append(out, id)
			i++
			continue
		}
		out = append(out, syms[i])
	}
	return out
}
