package jsonl

import (
	"errors"
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	type got struct {
		line int
		text string
		last bool
	}
	cases := []struct {
		in   string
		want []got
	}{
		{"", nil},
		{"a\n\n  b  \n", []got{{1, "a", false}, {3, "b", false}}},
		{"a\nb", []got{{1, "a", false}, {2, "b", true}}},
		{"\n\n\t\n", nil},
	}
	for _, c := range cases {
		var g []got
		err := Lines(strings.NewReader(c.in), "f", func(line int, text []byte, last bool) error {
			g = append(g, got{line, string(text), last})
			return nil
		})
		if err != nil || len(g) != len(c.want) {
			t.Fatalf("%q: %v %v", c.in, g, err)
		}
		for i := range g {
			if g[i] != c.want[i] {
				t.Errorf("%q: line %d = %+v, want %+v", c.in, i, g[i], c.want[i])
			}
		}
	}
	err := Lines(strings.NewReader("a\nb\nc\n"), "x.jsonl", func(line int, _ []byte, _ bool) error {
		if line == 2 {
			return errors.New("bad")
		}
		return nil
	})
	if err == nil || err.Error() != "x.jsonl:2: bad" {
		t.Errorf("error %v, want x.jsonl:2: bad", err)
	}
	n := 0
	if err := Lines(strings.NewReader("a\nb\nc\n"), "x", func(int, []byte, bool) error { n++; return ErrStop }); err != nil || n != 1 {
		t.Errorf("ErrStop: %v after %d lines", err, n)
	}
}
