package world

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/internal/jsonl"
	"github.com/cas-engine/cas/world/bpe"
)

// File names written by WriteDir.
const (
	CorpusFile    = "corpus.jsonl"
	TokenizerFile = "tokenizer.json"
	ManifestFile  = "world.json"
)

// SplitFile returns the file name of a split ("aps_calib.jsonl").
func SplitFile(s Split) string { return s.String() + ".jsonl" }

// Manifest summarises a written world (world.json). It holds no timestamps,
// so equal seeds and configs give byte-identical files.
type Manifest struct {
	Config    Config         `json:"config"`
	Entities  map[string]int `json:"entities"` // per kind
	Passages  int            `json:"passages"`
	Questions map[string]struct {
		Single int `json:"single"`
		Bridge int `json:"bridge"`
	} `json:"questions"` // per split
	Tokenizer struct {
		VocabSize int `json:"vocab_size"`
		Merges    int `json:"merges"`
		Added     int `json:"added_tokens"`
	} `json:"tokenizer"`
	Files []string `json:"files"`
}

// Manifest returns the world's summary for the given tokenizer.
func (w *World) Manifest(tok *bpe.Model) Manifest {
	var m Manifest
	m.Config = w.Config
	m.Entities = map[string]int{}
	for _, e := range w.Entities {
		m.Entities[e.Kind.String()]++
	}
	m.Passages = len(w.Passages)
	m.Questions = map[string]struct {
		Single int `json:"single"`
		Bridge int `json:"bridge"`
	}{}
	for _, s := range w.fileSplits() {
		c := m.Questions[s.String()]
		for _, q := range w.Splits[s] {
			if q.Hops == 1 {
				c.Single++
			} else {
				c.Bridge++
			}
		}
		m.Questions[s.String()] = c
	}
	if tok != nil {
		m.Tokenizer.VocabSize = tok.VocabSize()
		m.Tokenizer.Merges = len(tok.Merges)
		m.Tokenizer.Added = len(tok.Added)
	}
	m.Files = []string{CorpusFile}
	for _, s := range w.fileSplits() {
		m.Files = append(m.Files, SplitFile(s))
	}
	m.Files = append(m.Files, TokenizerFile, ManifestFile)
	return m
}

// fileSplits are the splits written as files: every split but an empty
// GRPO one, so that a world without it has the files it always had.
func (w *World) fileSplits() []Split {
	var out []Split
	for s := range NumSplits {
		if s != GRPO || len(w.Splits[s]) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// marshal encodes v as one line of JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteCorpus writes the passages as wiki-18 JSONL:
// {"id": "0", "contents": "\"Title\"\ntext"} per line.
func WriteCorpus(w io.Writer, ps []Passage) error {
	bw := bufio.NewWriter(w)
	for _, p := range ps {
		id, err := marshal(p.ID)
		if err != nil {
			return err
		}
		c, err := marshal(p.Contents())
		if err != nil {
			return err
		}
		fmt.Fprintf(bw, "{\"id\": %s, \"contents\": %s}\n", bytes.TrimSpace(id), bytes.TrimSpace(c))
	}
	return bw.Flush()
}

// WriteQuestions writes questions as FlashRAG JSONL, one object per line.
func WriteQuestions(w io.Writer, qs []Question) error {
	bw := bufio.NewWriter(w)
	for _, q := range qs {
		b, err := marshal(q)
		if err != nil {
			return fmt.Errorf("question %s: %w", q.ID, err)
		}
		bw.Write(b)
	}
	return bw.Flush()
}

// WriteDir writes the world into dir: corpus.jsonl, train.jsonl,
// aps_calib.jsonl, aci_calib.jsonl, test.jsonl, tokenizer.json and
// world.json. Every file is written to a temporary name first and renamed
// only once all of them are complete, so a failure leaves no half-written
// file behind.
func (w *World) WriteDir(dir string, tok *bpe.Model) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	var pending []*atomicfile.File
	defer func() {
		for _, f := range pending {
			f.Abort() // after a failure; nothing once committed
		}
	}()
	write := func(name string, fn func(io.Writer) error) error {
		f, err := atomicfile.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		pending = append(pending, f)
		bw := bufio.NewWriter(f)
		err = fn(bw)
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", filepath.Join(dir, name), err)
		}
		return nil
	}
	if err := write(CorpusFile, func(f io.Writer) error { return WriteCorpus(f, w.Passages) }); err != nil {
		return err
	}
	for _, s := range w.fileSplits() {
		if err := write(SplitFile(s), func(f io.Writer) error { return WriteQuestions(f, w.Splits[s]) }); err != nil {
			return err
		}
	}
	if tok != nil {
		if err := write(TokenizerFile, tok.WriteJSON); err != nil {
			return err
		}
	}
	if err := write(ManifestFile, func(f io.Writer) error {
		b, err := json.MarshalIndent(w.Manifest(tok), "", "  ")
		if err != nil {
			return err
		}
		_, err = f.Write(append(b, '\n'))
		return err
	}); err != nil {
		return err
	}
	for _, f := range pending {
		if err := f.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// ReadCorpus parses wiki-18 JSONL: {"id": …, "contents": "\"Title\"\ntext"}.
// The title is the first line of contents with surrounding quotes removed;
// Entity is -1 (unknown).
func ReadCorpus(r io.Reader) ([]Passage, error) {
	var out []Passage
	err := jsonl.Each(r, func(n int, line []byte) error {
		var j struct {
			ID       *string `json:"id"`
			Contents *string `json:"contents"`
		}
		if err := json.Unmarshal(line, &j); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if j.ID == nil || *j.ID == "" || j.Contents == nil {
			return fmt.Errorf("line %d: want non-empty \"id\" and a \"contents\" field", n)
		}
		title, text, _ := strings.Cut(*j.Contents, "\n")
		title = strings.TrimSuffix(strings.TrimPrefix(title, `"`), `"`)
		out = append(out, Passage{ID: *j.ID, Title: title, Text: text, Entity: -1})
		return nil
	})
	return out, err
}

// ReadQuestions parses FlashRAG JSONL questions, checking that every line
// has an id, a question and a golden answer, and — when hops is given —
// that hop_info and gold_ids have one entry per hop.
func ReadQuestions(r io.Reader) ([]Question, error) {
	var out []Question
	err := jsonl.Each(r, func(n int, line []byte) error {
		var q Question
		if err := json.Unmarshal(line, &q); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		switch {
		case q.ID == "":
			return fmt.Errorf("line %d: missing \"id\"", n)
		case q.Question == "":
			return fmt.Errorf("line %d (%s): missing \"question\"", n, q.ID)
		case len(q.GoldenAnswers) == 0:
			return fmt.Errorf("line %d (%s): no \"golden_answers\"", n, q.ID)
		case q.Hops < 0 || q.Hops > 8:
			return fmt.Errorf("line %d (%s): hops = %d", n, q.ID, q.Hops)
		case q.Hops > 0 && (len(q.HopInfo) != q.Hops || len(q.GoldIDs) != q.Hops):
			return fmt.Errorf("line %d (%s): hops = %d but %d hop_info and %d gold_ids entries", n, q.ID, q.Hops, len(q.HopInfo), len(q.GoldIDs))
		}
		out = append(out, q)
		return nil
	})
	return out, err
}

// ReadQuestionsFile reads a split file.
func ReadQuestionsFile(path string) ([]Question, error) { return jsonl.ReadFile(path, ReadQuestions) }

// ReadCorpusFile reads a corpus file.
func ReadCorpusFile(path string) ([]Passage, error) { return jsonl.ReadFile(path, ReadCorpus) }
