package train

import (
	"fmt"
	"math/rand/v2"

	"github.com/cas-engine/cas/qa"
)

// Cursor is the position of a Loader: the epoch (0-based) and the index of
// the next prompt within that epoch's order.
type Cursor struct {
	Epoch int `json:"epoch"`
	Pos   int `json:"pos"`
}

// Loader hands out batches of prompts epoch after epoch, each epoch in a
// fresh permutation drawn from (seed, epoch) when shuffling, so that a
// cursor alone restores its position exactly. A batch never spans two
// epochs: an epoch's last partial batch is dropped (verl's drop_last).
type Loader struct {
	prompts []qa.Record
	seed    uint64
	shuffle bool
	cur     Cursor
	order   []int // permutation of the current epoch
}

// NewLoader returns a loader at epoch 0, position 0.
func NewLoader(prompts []qa.Record, seed uint64, shuffle bool) *Loader {
	l := &Loader{prompts: prompts, seed: seed, shuffle: shuffle}
	l.SetCursor(Cursor{})
	return l
}

// Len is the number of prompts.
func (l *Loader) Len() int { return len(l.prompts) }

// Cursor returns the current position.
func (l *Loader) Cursor() Cursor { return l.cur }

// SetCursor moves to a position.
func (l *Loader) SetCursor(c Cursor) {
	l.cur = c
	l.order = l.epochOrder(c.Epoch)
}

func (l *Loader) epochOrder(epoch int) []int {
	n := len(l.prompts)
	if !l.shuffle {
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		return order
	}
	return rand.New(rand.NewPCG(l.seed, uint64(epoch)+0x6a09e667f3bcc908)).Perm(n)
}

// Next returns the next batch of n prompts.
func (l *Loader) Next(n int) ([]qa.Record, error) {
	if n < 1 || n > len(l.prompts) {
		return nil, fmt.Errorf("data: batch of %d prompts from %d", n, len(l.prompts))
	}
	if l.cur.Pos+n > len(l.order) {
		l.SetCursor(Cursor{Epoch: l.cur.Epoch + 1})
	}
	out := make([]qa.Record, n)
	for i := range out {
		out[i] = l.prompts[l.order[l.cur.Pos+i]]
	}
	l.cur.Pos += n
	return out, nil
}

// DrawPrompts picks n distinct prompts with a seeded draw (all of them, in
// order, when n ≥ len(prompts)).
func DrawPrompts(prompts []qa.Record, n int, seed uint64) []qa.Record {
	if n >= len(prompts) {
		return append([]qa.Record(nil), prompts...)
	}
	perm := rand.New(rand.NewPCG(seed, 0xbb67ae8584caa73b)).Perm(len(prompts))
	out := make([]qa.Record, n)
	for i := range out {
		out[i] = prompts[perm[i]]
	}
	return out
}
