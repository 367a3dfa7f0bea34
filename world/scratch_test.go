package world

import (
	"fmt"
	"testing"
	"time"
)

func TestScratch(t *testing.T) {
	for _, cfg := range []Config{SmallConfig(1), DefaultConfig(1)} {
		t0 := time.Now()
		w, err := Generate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		tok, err := w.TrainTokenizer()
		if err != nil {
			t.Fatal(err)
		}
		t2 := time.Now()
		fmt.Println("gen", t1.Sub(t0), "tok", t2.Sub(t1), "passages", len(w.Passages), "vocab", tok.VocabSize(), "merges", len(tok.Merges))
		for s := range NumSplits {
			fmt.Println(s, len(w.Splits[s]))
		}
		for i := 0; i < 12; i++ {
			fmt.Println(w.Passages[i*37%len(w.Passages)].Contents())
		}
		for i := 0; i < 12; i++ {
			q := w.Splits[Test][i]
			fmt.Println(q.Question, q.GoldenAnswers, q.GoldIDs)
		}
		tr, _ := Script(w.Splits[Test][0], func(string) []Passage { return w.Passages[:2] }, nil)
		fmt.Println(tr.Text())
		n := 0
		for _, p := range w.Passages {
			n += len(tok.Encode(p.Contents()))
		}
		fmt.Println("avg tokens/passage", float64(n)/float64(len(w.Passages)))
		fmt.Println(tok.Vocab[256:400])
	}
}
