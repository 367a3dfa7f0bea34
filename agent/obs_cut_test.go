package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/model/tokenizer/tokentest"
)

// TestCutObservationBoundary cuts information blocks 0–3 and 10 tokens over
// MaxObsTokens, with Search-R1's blind cut and with the closing tail kept,
// in both information formats, with the real Qwen3 tokenizer: the cut never
// pads past the encoded text (it used to append token 0, "!", or panic when
// a block was 1–3 tokens over) and keeps exactly what it says.
func TestCutObservationBoundary(t *testing.T) {
	tok := tokentest.Qwen3(t)
	body := "Doc 1 (Title: \"Paris\")\nParis is the capital and most populous city of France, with an estimated population of 2,102,650 residents.\n"
	for _, f := range []InfoFormat{InfoCode, InfoSearchR1} {
		open, tail := InformationOpen, infoTail(f)
		if f == InfoSearchR1 {
			open = "\n\n" + InformationOpen
		}
		text := open + body + tail
		full := len(tok.Encode(text))
		tailIDs := tok.Encode(tail)
		for _, over := range []int{0, 1, 2, 3, 10} {
			for _, blind := range []bool{true, false} {
				name := fmt.Sprintf("%v over=%d blind=%v", f, over, blind)
				cfg := DefaultRolloutConfig()
				cfg.Info, cfg.ObsCutBlind, cfg.MaxObsTokens = f, blind, full-over
				ids, cut := cutObservation(tok, cfg, text, ObsInformation)
				if len(ids) > cfg.MaxObsTokens || cut != (over > 0) {
					t.Fatalf("%s: %d tokens (limit %d), cut %v", name, len(ids), cfg.MaxObsTokens, cut)
				}
				switch {
				case over == 0:
					if !slices.Equal(ids, tok.Encode(text)) {
						t.Fatalf("%s: an observation within the limit changed", name)
					}
				case blind:
					if !slices.Equal(ids, tok.Encode(text)[:full-over]) {
						t.Fatalf("%s: blind cut %q is not the first %d tokens", name, tok.Decode(ids, false), full-over)
					}
				default:
					head := ids[:len(ids)-len(tailIDs)]
					if !slices.Equal(ids[len(head):], tailIDs) || !slices.Equal(head, tok.Encode(open + body)[:len(head)]) {
						t.Fatalf("%s: %q is not a prefix of the body and the tail", name, tok.Decode(ids, false))
					}
					if !strings.HasPrefix(open+body, tok.Decode(head, false)) {
						t.Fatalf("%s: kept body %q", name, tok.Decode(head, false))
					}
				}
			}
		}
	}
	// Other observations (the invalid-action message) are cut plainly, and
	// a limit below the tail's length cuts plainly too.
	cfg := DefaultRolloutConfig()
	cfg.MaxObsTokens = 5
	ids, cut := cutObservation(tok, cfg, InvalidActionMessage, ObsInvalid)
	if !cut || !slices.Equal(ids, tok.Encode(InvalidActionMessage)[:5]) {
		t.Fatalf("invalid-action message cut to %q", tok.Decode(ids, false))
	}
	cfg.MaxObsTokens = 2
	text := InformationOpen + body + InformationClose
	if ids, _ := cutObservation(tok, cfg, text, ObsInformation); !slices.Equal(ids, tok.Encode(text)[:2]) {
		t.Fatalf("limit below the tail: %q", tok.Decode(ids, false))
	}
}
