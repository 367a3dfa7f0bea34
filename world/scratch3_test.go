package world

import (
	"encoding/json"
	"os"
	"testing"
)

func TestScratchDump(t *testing.T) {
	w, err := Generate(SmallConfig(3))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := w.TrainTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteDir("/tmp/hfcheck/w3", tok); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Create("/tmp/hfcheck/cases.jsonl")
	defer f.Close()
	enc := json.NewEncoder(f)
	var texts []string
	w.TrainingText(func(s string, _ int) { texts = append(texts, s) })
	texts = append(texts, "Hello  world!\n\n  It's   naïve café 東京 — 12345 don't   \t x", " leading", "trailing  ", "a\r\nb", "<think>x</think><|im_end|>y<answer> A </answer>", "ĠĊ weird ü", "'s 'S ''s !'s", "  \n\na", "\u00a0x\u2003y", "emoji 🤖🤖 ok", "<thinking> <search", "1952 and 19 and 2024.")
	for _, s := range texts {
		enc.Encode(map[string]any{"text": s, "ids": tok.Encode(s), "decoded": tok.Decode(tok.Encode(s), false)})
	}
}
