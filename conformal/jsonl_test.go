package conformal

import (
	"strings"
	"testing"
)

func TestReadQueries(t *testing.T) {
	in := `{"scores":[0.8,0.82,0.79],"gold":1,"qid":"q1"}

{"scores": [1], "gold": -1}` + "\r\n" + `{"scores":[0.5,0.4],"gold":0}`
	qs, err := ReadQueries(strings.NewReader(in), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 3 || qs[0].Gold != 1 || len(qs[0].Scores) != 3 || qs[1].Gold != NoGold || qs[2].Scores[1] != 0.4 {
		t.Fatalf("parsed %+v", qs)
	}
	// Inference input: gold optional.
	qs, err = ReadQueries(strings.NewReader(`{"scores":[1,2]}`), false)
	if err != nil || qs[0].Gold != NoGold {
		t.Fatalf("optional gold: %+v %v", qs, err)
	}
}

func TestReadQueriesErrors(t *testing.T) {
	ok := `{"scores":[1,2],"gold":0}` + "\n"
	for _, c := range []struct {
		in, want string
	}{
		{ok + `{"scores":[1,2],"gold":0`, "line 2: malformed JSON"},
		{ok + ok + `{"scores":[],"gold":-1}`, "line 3: empty score list"},
		{`{"gold":0}`, "line 1: empty score list"},
		{`{"scores":[1,NaN],"gold":0}`, "line 1: malformed JSON"},
		{`{"scores":[1,1e999],"gold":0}`, "line 1: malformed JSON"},
		{`{"scores":[1,"x"],"gold":0}`, "line 1: malformed JSON"},
		{`{"scores":[1,2],"gold":2}`, "line 1: gold index 2 out of range [0, 2)"},
		{`{"scores":[1,2],"gold":-2}`, "line 1: gold index -2 out of range"},
		{`{"scores":[1,2],"gold":1.5}`, "line 1: malformed JSON"},
		{`{"scores":[1,2]}`, `line 1: missing "gold"`},
		{ok + "\n\n" + `[1,2]`, "line 4: malformed JSON"},
		{`{"scores":[1]} {"scores":[2]}`, "line 1: malformed JSON"},
		{"", "no queries"},
		{"\n  \n", "no queries"},
	} {
		_, err := ReadQueries(strings.NewReader(c.in), true)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("input %q: error %v, want %q", c.in, err, c.want)
		}
	}
}

func TestReadScoreLines(t *testing.T) {
	got, err := ReadScoreLines(strings.NewReader("{\"scores\":[1.5,2]}\n\n{\"scores\":[3],\"step\":2}\n"))
	if err != nil || len(got) != 2 || got[0][0] != 1.5 || got[1][0] != 3 {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, c := range []struct{ in, want string }{
		{`{"scores":[1]}` + "\n" + `{"scores":[]}`, "line 2: empty score list"},
		{`{"scores":[1]}` + "\n" + `{"scores":[1,}`, "line 2: malformed JSON"},
		{`{"scores":null}`, "line 1: empty score list"},
		{``, "no score lines"},
	} {
		if _, err := ReadScoreLines(strings.NewReader(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("input %q: error %v, want %q", c.in, err, c.want)
		}
	}
}

// FuzzReadQueries: any input parses or fails with a line-numbered error;
// whatever parses satisfies the documented invariants.
func FuzzReadQueries(f *testing.F) {
	f.Add([]byte(`{"scores":[0.8,0.82,0.79],"gold":1}` + "\n" + `{"scores":[1],"gold":-1}`))
	f.Add([]byte(`{"scores":[1e308,-1e308],"gold":0}`))
	f.Add([]byte("{\"scores\":[1],\"gold\":5}\n\n"))
	f.Add([]byte(`{"scores":[1,2]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, req := range []bool{true, false} {
			qs, err := ReadQueries(strings.NewReader(string(b)), req)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "line ") && !strings.HasPrefix(err.Error(), "no queries") {
					t.Fatalf("error without a line: %v", err)
				}
				continue
			}
			for _, q := range qs {
				if checkScores(q.Scores) != nil || q.Gold < NoGold || q.Gold >= len(q.Scores) {
					t.Fatalf("invalid query accepted: %+v", q)
				}
				// Every parsed query must go through APS without error.
				if _, err := PaperAPS().Score(q.Scores, q.Gold); err != nil {
					t.Fatalf("parsed query fails Score: %v", err)
				}
				_ = PaperAPS().Keep(q.Scores, 0.9)
			}
		}
	})
}

func FuzzReadScoreLines(f *testing.F) {
	f.Add([]byte(`{"scores":[1.5,2]}` + "\n" + `{"scores":[3]}`))
	f.Add([]byte(`{"scores":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, err := ReadScoreLines(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		a, err := NewACI(DefaultACIConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			if _, err := a.Step(l); err != nil {
				t.Fatalf("parsed line fails Step: %v", err)
			}
		}
	})
}
