// Package piecetok is a tokenizer for tests with the tiny golden Qwen
// models, whose vocabulary (384) is far below any real tokenizer's: ids
// 0–255 are bytes, ids 256 … Vocab−2 are pieces (the Fixed ones, then the
// Cycled ones repeated to fill the range) and Vocab−1 is the special EOS
// "<|im_end|>". Encode matches the longest piece at each position and falls
// back to bytes, so prompts made of the pieces are short; a random model
// sampling near-uniformly writes the pieces (tags) often.
package piecetok

import "strings"

// Tokenizer is the piece tokenizer; it implements the agent's tokenizer
// (Encode, Decode, Family).
type Tokenizer struct {
	Vocab  int
	Fam    string   // chat template family Family returns
	Fixed  []string // pieces 256, 257, …
	Cycled []string // the following pieces, cycled up to Vocab−2
}

// EOS is the id of "<|im_end|>", the last of the vocabulary.
func (p Tokenizer) EOS() int { return p.Vocab - 1 }

// Piece returns the text of a piece id (256 ≤ id < EOS).
func (p Tokenizer) Piece(id int) string {
	i := id - 256
	if i < len(p.Fixed) {
		return p.Fixed[i]
	}
	return p.Cycled[(i-len(p.Fixed))%len(p.Cycled)]
}

// Encode greedily takes the longest piece at each position, else a byte.
func (p Tokenizer) Encode(text string) []int {
	var out []int
	for i := 0; i < len(text); {
		best, bestLen := int(text[i]), 1
		for id := 256; id < p.EOS(); id++ {
			if pc := p.Piece(id); len(pc) > bestLen && strings.HasPrefix(text[i:], pc) {
				best, bestLen = id, len(pc)
			}
		}
		out = append(out, best)
		i += bestLen
	}
	return out
}

// Decode writes bytes and pieces, and the EOS unless skipSpecial; ids
// outside the vocabulary are dropped.
func (p Tokenizer) Decode(ids []int, skipSpecial bool) string {
	var b strings.Builder
	for _, id := range ids {
		switch {
		case id >= 0 && id < 256:
			b.WriteByte(byte(id))
		case id == p.EOS():
			if !skipSpecial {
				b.WriteString("<|im_end|>")
			}
		case id >= 256 && id < p.EOS():
			b.WriteString(p.Piece(id))
		}
	}
	return b.String()
}

// Family returns Fam.
func (p Tokenizer) Family() string { return p.Fam }
