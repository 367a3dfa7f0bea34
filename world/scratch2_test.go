package world

import (
	"fmt"
	"strings"
	"testing"
)

func TestScratch2(t *testing.T) {
	for _, v := range []int{768, 1000} {
		cfg := DefaultConfig(1)
		cfg.VocabSize = v
		w, _ := Generate(cfg)
		tok, _ := w.TrainTokenizer()
		n, words := 0, 0
		for _, p := range w.Passages {
			n += len(tok.Encode(p.Contents()))
			words += len(strings.Fields(p.Contents()))
		}
		pt := len(tok.Encode(promptText("Where was Kugo Rasrel born?")))
		tt := 0
		for _, q := range w.Splits[Train] {
			tr, _ := Script(q, func(string) []Passage { return nil }, nil)
			tt += len(tok.Encode(tr.Text()))
		}
		fmt.Printf("vocab %d merges %d avg tokens/passage %.1f words/passage %.1f prompt %d traj(no info) %.1f\n", v, len(tok.Merges), float64(n)/float64(len(w.Passages)), float64(words)/float64(len(w.Passages)), pt, float64(tt)/float64(len(w.Splits[Train])))
		if v == 768 {
			for _, p := range w.Passages[100:104] {
				var parts []string
				for _, id := range tok.Encode(p.Contents()) {
					parts = append(parts, tok.Decode([]int{id}, false))
				}
				fmt.Println(strings.Join(parts, "|"))
			}
		}
	}
}
