package piecetok

import (
	"slices"
	"testing"
)

// TestEncodeDecode: the longest piece wins, bytes fill the gaps, cycled
// pieces repeat up to Vocab−2 (a one-byte piece is never chosen over its byte), EOS is Vocab−1 and Decode inverts Encode.
func TestEncodeDecode(t *testing.T) {
	p := Tokenizer{Vocab: 262, Fam: "qwen3", Fixed: []string{"<a>", "<ab>"}, Cycled: []string{"x", "yz"}}
	for _, tc := range []struct {
		text string
		ids  []int
	}{
		{"<ab>", []int{257}},
		{"<a>q", []int{256, 'q'}},
		{"yzx", []int{259, 'x'}}, // a one-byte piece never beats the byte
		{"<<a>", []int{'<', 256}},
	} {
		got := p.Encode(tc.text)
		if !slices.Equal(got, tc.ids) {
			t.Errorf("Encode(%q) = %v, want %v", tc.text, got, tc.ids)
		}
		if back := p.Decode(got, true); back != tc.text {
			t.Errorf("Decode(Encode(%q)) = %q", tc.text, back)
		}
	}
	if got := p.Piece(260); got != "x" {
		t.Errorf("Piece(260) = %q, want the cycled %q", got, "x")
	}
	if p.EOS() != 261 || p.Decode([]int{261}, false) != "<|im_end|>" || p.Decode([]int{261, 999, -1}, true) != "" {
		t.Errorf("EOS %d decodes as %q", p.EOS(), p.Decode([]int{261}, false))
	}
	if p.Family() != "qwen3" {
		t.Errorf("Family() = %q", p.Family())
	}
}
