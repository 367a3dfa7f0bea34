package gpubench

import (
	"strings"
	"testing"
)

// TestShapes: the named shapes have the published parameter counts of
// Qwen2.5-0.5B and Qwen2.5-3B (Hugging Face model cards: 0.49B and 3.09B)
// and validate; unknown names list the known ones.
func TestShapes(t *testing.T) {
	for name, want := range map[string]int64{
		"qwen2.5-0.5b": 494_032_768,
		"qwen2.5-3b":   3_085_938_688,
	} {
		c, err := LookupShape(strings.ToUpper(name))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if got := c.NumParameters(); got != want {
			t.Errorf("%s: %d parameters, want %d", name, got, want)
		}
	}
	if c, _ := LookupShape("tiny"); c == nil || c.Validate() != nil || c.VocabSize < 768 {
		t.Errorf("tiny shape %+v must validate and hold the small world's 768-token vocabulary", c)
	}
	if _, err := LookupShape("qwen9"); err == nil || !strings.Contains(err.Error(), "qwen2.5-0.5b") {
		t.Errorf("unknown shape error %v", err)
	}
}
