package search

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
)

func TestSplitContents(t *testing.T) {
	tests := []struct{ contents, title, text string }{
		{"\"Evan Morris\"\nEvan Morris Evan L. Morris", "Evan Morris", "Evan Morris Evan L. Morris"},
		{"Citibank\nresulting in a net profit", "Citibank", "resulting in a net profit"},
		{"\"Only title\"", "Only title", ""},
		{"\"A\"\nline one\nline two", "A", "line one\nline two"},
		{"\"\"Quoted\" title\"\nx", "Quoted\" title", "x"},
		{"only a title", "only a title", ""},
		{"", "", ""},
	}
	for _, tc := range tests {
		title, text := SplitContents(tc.contents)
		if title != tc.title || text != tc.text {
			t.Errorf("SplitContents(%q) = %q, %q; want %q, %q", tc.contents, title, text, tc.title, tc.text)
		}
	}
}

func TestParseDocLine(t *testing.T) {
	tests := []struct {
		line    string
		id      string
		content string
		wantErr bool
	}{
		{`{"id": "0", "contents": "\"T\"\nx"}`, "0", "\"T\"\nx", false},
		{`{"id": 17, "contents": "T\nx"}`, "17", "T\nx", false},
		{`{"id": "a", "title": "T", "text": "x"}`, "a", "T\nx", false},
		{`{"id": "a"}`, "", "", true},
		{`{"contents": "x"}`, "", "", true},
		{`{"id": [1], "contents": "x"}`, "", "", true},
		{`not json`, "", "", true},
	}
	for _, tc := range tests {
		d, err := ParseDocLine([]byte(tc.line))
		if (err != nil) != tc.wantErr {
			t.Errorf("ParseDocLine(%s): err = %v, wantErr %v", tc.line, err, tc.wantErr)
			continue
		}
		if err == nil && (d.ID != tc.id || d.Contents != tc.content) {
			t.Errorf("ParseDocLine(%s) = %+v", tc.line, d)
		}
	}
}

// TestCorpusRealSamples checks both shared samples: every row read through
// the offsets table equals the line read sequentially, titles are parsed,
// and ids resolve.
func TestCorpusRealSamples(t *testing.T) {
	tests := []struct {
		file       string
		n          int
		row        int
		id, title  string
		textPrefix string
	}{
		{"wiki18_sample_1k.jsonl", 1000, 0, "0", "Evan Morris", "Evan Morris Evan L. Morris (January 26, 1977"},
		{"wiki18_sample_1k.jsonl", 1000, 1, "1", "Horatio Hale", "consisted of an Algonkin vocabulary"},
		{"wiki18_harvested_10k.jsonl", 9989, 0, "0", "Citibank", "resulting in a net profit for the U.S. federal government."},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := sharedtest.Path(t, "data", "corpus", tc.file)
			offs := filepath.Join(t.TempDir(), "c.offsets")
			c, err := BuildCorpusOffsets(path, offs, nil)
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
			c, err = OpenCorpus(path, offs)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Len() != tc.n {
				t.Fatalf("Len = %d, want %d", c.Len(), tc.n)
			}
			d, err := c.Doc(tc.row)
			if err != nil {
				t.Fatal(err)
			}
			if d.ID != tc.id || d.Title != tc.title || !strings.HasPrefix(d.Text, tc.textPrefix) {
				t.Errorf("row %d = {ID %q Title %q Text %.60q}", tc.row, d.ID, d.Title, d.Text)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := bytes.Split(bytes.TrimRight(raw, "\n"), []byte("\n"))
			if len(lines) != tc.n {
				t.Fatalf("file has %d lines", len(lines))
			}
			for _, row := range []int{0, 1, tc.n / 2, tc.n - 1} {
				got, err := c.Line(row)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, lines[row]) {
					t.Errorf("Line(%d) differs from the file's line", row)
				}
				want, _ := ParseDocLine(lines[row])
				if r, ok := c.Lookup(want.ID); !ok || r != row {
					t.Errorf("Lookup(%q) = %d, %v; want %d", want.ID, r, ok, row)
				}
			}
			rows := 0
			if err := c.Scan(nil, func(row int, d Doc) error {
				if row != rows {
					t.Fatalf("Scan row %d, want %d", row, rows)
				}
				rows++
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if rows != tc.n {
				t.Errorf("Scan visited %d rows", rows)
			}
			if _, err := c.Doc(tc.n); err == nil {
				t.Error("Doc(n): want an out-of-range error")
			}
			if _, ok := c.Lookup("-1"); ok {
				t.Error(`Lookup("-1") found a row`)
			}
		})
	}
}

// TestCorpusNonSequentialIDs covers string ids (hash table), blank lines,
// CRLF endings, a line longer than the read buffer, and a missing newline.
func TestCorpusNonSequentialIDs(t *testing.T) {
	long := strings.Repeat("word ", 400000) // 2 MB line
	content := "{\"id\": \"doc-b\", \"contents\": \"\\\"B\\\"\\nbee\"}\r\n\n" +
		"{\"id\": \"doc-a\", \"contents\": \"A\\n" + long + "\"}\n" +
		"   \n" +
		"{\"id\": 7, \"contents\": \"Seven\\nseven\"}"
	dir := t.TempDir()
	path := filepath.Join(dir, "c.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := BuildCorpusOffsets(path, filepath.Join(dir, "c.offsets"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c, err = OpenCorpus(path, filepath.Join(dir, "c.offsets"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Len() != 3 {
		t.Fatalf("Len = %d, want 3", c.Len())
	}
	for id, want := range map[string]struct {
		row   int
		title string
	}{"doc-b": {0, "B"}, "doc-a": {1, "A"}, "7": {2, "Seven"}} {
		d, err := c.DocByID(id)
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := c.Lookup(id); r != want.row || d.Title != want.title {
			t.Errorf("id %q: row %d title %q, want %d %q", id, r, d.Title, want.row, want.title)
		}
	}
	d, _ := c.Doc(1)
	if len(d.Text) != len(long) {
		t.Errorf("long line text has %d bytes, want %d", len(d.Text), len(long))
	}
	if _, err := c.DocByID("doc-c"); err == nil {
		t.Error("DocByID(doc-c): want an error")
	}
}

func TestCorpusErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"id\": \"0\", \"contents\": \"x\"}\n{\"id\": \"1\"}\n"), 0o644)
	if _, err := BuildCorpusOffsets(bad, filepath.Join(dir, "bad.offsets"), nil); err == nil || !strings.Contains(err.Error(), "bad.jsonl:2") {
		t.Errorf("bad line: err = %v, want one naming bad.jsonl:2", err)
	}
	good := filepath.Join(dir, "good.jsonl")
	os.WriteFile(good, []byte("{\"id\": \"0\", \"contents\": \"x\"}\n"), 0o644)
	offs := filepath.Join(dir, "good.offsets")
	c, err := BuildCorpusOffsets(good, offs, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	// Same size, different bytes: the fingerprint must catch it.
	os.WriteFile(good, []byte("{\"id\": \"0\", \"contents\": \"y\"}\n"), 0o644)
	if _, err := OpenCorpus(good, offs); err == nil || !strings.Contains(err.Error(), "do not match") {
		t.Errorf("changed corpus: err = %v", err)
	}
	os.WriteFile(good, []byte("{\"id\": \"0\", \"contents\": \"xy\"}\n"), 0o644)
	if _, err := OpenCorpus(good, offs); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("resized corpus: err = %v", err)
	}
	raw, _ := os.ReadFile(offs)
	raw[20] ^= 1
	os.WriteFile(offs, raw, 0o644)
	if _, err := OpenCorpus(good, offs); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("corrupt offsets: err = %v", err)
	}
}

func FuzzParseDocLine(f *testing.F) {
	for _, s := range []string{`{"id": "0", "contents": "\"T\"\nx"}`, `{"id": 1e3, "contents": ""}`, `{"id": "a", "title": "T", "text": "x"}`, `{`, `[]`, `{"id": null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDocLine(b)
		if err != nil {
			return
		}
		if !strings.HasSuffix(d.Contents, d.Text) || strings.HasPrefix(d.Title, `"`) || strings.HasSuffix(d.Title, `"`) || strings.Contains(d.Title, "\n") {
			t.Fatalf("bad split of %q: title %q text %q", d.Contents, d.Title, d.Text)
		}
	})
}

func FuzzDecodeOffsets(f *testing.F) {
	dir := f.TempDir()
	path := filepath.Join(dir, "c.jsonl")
	os.WriteFile(path, []byte("{\"id\": \"x\", \"contents\": \"a\"}\n{\"id\": \"0\", \"contents\": \"b\"}\n"), 0o644)
	c, err := BuildCorpusOffsets(path, filepath.Join(dir, "c.offsets"), nil)
	if err != nil {
		f.Fatal(err)
	}
	c.Close()
	raw, _ := os.ReadFile(filepath.Join(dir, "c.offsets"))
	f.Add(raw)
	f.Add(raw[:len(raw)-5])
	f.Add([]byte(offsetsMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, _, _, err := decodeOffsets(b)
		if err == nil && c.Len() < 0 {
			t.Fatal("negative length")
		}
	})
}

func BenchmarkCorpusDoc(b *testing.B) {
	c := openTestCorpus(b, sharedtest.Path(b, "data", "corpus", "wiki18_harvested_10k.jsonl"))
	i := 0
	for b.Loop() {
		if _, err := c.Doc(i % c.Len()); err != nil {
			b.Fatal(err)
		}
		i += 7919
	}
}
