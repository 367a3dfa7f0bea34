package train

import (
	"bytes"
	"testing"

	"github.com/cas-engine/cas/qa"
)

// TestLoaderCursor: batches never span epochs, epochs are fresh
// permutations, and a cursor restores the exact sequence.
func TestLoaderCursor(t *testing.T) {
	var ps []qa.Record
	for i := range 10 {
		ps = append(ps, qa.Record{ID: string(rune('a' + i)), Question: "q", Answers: []string{"a"}})
	}
	ids := func(b []qa.Record) string {
		var s bytes.Buffer
		for _, p := range b {
			s.WriteString(p.ID)
		}
		return s.String()
	}
	l := NewLoader(ps, 42, true)
	var seq []string
	var cursors []Cursor
	for range 7 {
		cursors = append(cursors, l.Cursor())
		b, err := l.Next(4)
		if err != nil {
			t.Fatal(err)
		}
		seq = append(seq, ids(b))
	}
	// 10 prompts, batches of 4: two per epoch, the last 2 of each epoch dropped.
	if l.Cursor().Epoch != 3 || l.Cursor().Pos != 4 {
		t.Errorf("cursor after 7 batches: %+v", l.Cursor())
	}
	if seq[0]+seq[1] == seq[2]+seq[3] {
		t.Error("two epochs in the same order")
	}
	for k, c := range cursors {
		r := NewLoader(ps, 42, true)
		r.SetCursor(c)
		b, _ := r.Next(4)
		if ids(b) != seq[k] {
			t.Errorf("restored cursor %+v gives %s, want %s", c, ids(b), seq[k])
		}
	}
	plain := NewLoader(ps, 42, false)
	if b, _ := plain.Next(3); ids(b) != "abc" {
		t.Errorf("unshuffled batch %s", ids(b))
	}
	if _, err := plain.Next(11); err == nil {
		t.Error("batch larger than the data accepted")
	}
	if d := DrawPrompts(ps, 3, 1); len(d) != 3 || ids(d) == "abc" && ids(DrawPrompts(ps, 3, 2)) == "abc" {
		t.Errorf("draw %s", ids(d))
	}
}
