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

// errReader fails after its text.
type errReader struct{ text string }

func (e *errReader) Read(p []byte) (int, error) {
	if e.text == "" {
		return 0, errors.New("disk gone")
	}
	n := copy(p, e.text)
	e.text = e.text[n:]
	return n, nil
}

// TestEach: fn's error comes back unchanged, a read error names the line,
// and blank lines are skipped with their numbers kept.
func TestEach(t *testing.T) {
	var lines []int
	err := Each(strings.NewReader("a\n\n b \nc"), func(line int, text []byte) error {
		lines = append(lines, line)
		if string(text) == "c" {
			return errors.New("line 4: bad c")
		}
		return nil
	})
	if err == nil || err.Error() != "line 4: bad c" || len(lines) != 3 || lines[1] != 3 {
		t.Errorf("Each: %v after lines %v", err, lines)
	}
	err = Each(&errReader{"a\nb"}, func(int, []byte) error { return nil })
	if err == nil || err.Error() != "line 2: disk gone" {
		t.Errorf("read error %v, want line 2: disk gone", err)
	}
	err = Lines(&errReader{"a\nb"}, "x", func(int, []byte, bool) error { return nil })
	if err == nil || err.Error() != "x:2: disk gone" {
		t.Errorf("Lines read error %v, want x:2: disk gone", err)
	}
}

// TestCollect: records in order, blank lines skipped; parse errors named
// "name:line:" by Collect and unchanged by CollectEach; an empty stream is
// the given error, or an empty result with none nil.
func TestCollect(t *testing.T) {
	parse := func(line int, b []byte) (string, error) {
		if string(b) == "bad" {
			return "", errors.New("bad record")
		}
		return string(b), nil
	}
	got, err := Collect(strings.NewReader("a\n\n b \n"), "f", nil, parse)
	if err != nil || strings.Join(got, ",") != "a,b" {
		t.Errorf("Collect = %q, %v", got, err)
	}
	if _, err := Collect(strings.NewReader("a\nbad\n"), "f", nil, parse); err == nil || err.Error() != "f:2: bad record" {
		t.Errorf("Collect error: %v", err)
	}
	if _, err := CollectEach(strings.NewReader("a\nbad\n"), nil, parse); err == nil || err.Error() != "bad record" {
		t.Errorf("CollectEach error: %v", err)
	}
	none := errors.New("no records")
	if got, err := CollectEach(strings.NewReader("\n \n"), none, parse); err != none || got != nil {
		t.Errorf("CollectEach of nothing = %q, %v", got, err)
	}
	if got, err := Collect(strings.NewReader(""), "f", nil, parse); err != nil || len(got) != 0 {
		t.Errorf("Collect of nothing, none nil = %q, %v", got, err)
	}
}
