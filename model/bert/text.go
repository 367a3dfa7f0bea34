package bert

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// E5's input prefixes (Wang et al., 2022): queries and passages are embedded
// with different instructions.
const (
	QueryPrefix   = "query: "
	PassagePrefix = "passage: "
)

// PrefixFor maps a prefix kind ("query", "passage", or "none") to the text
// prepended to each input.
func PrefixFor(kind string) (string, error) {
	switch kind {
	case "query":
		return QueryPrefix, nil
	case "passage":
		return PassagePrefix, nil
	case "none", "":
		return "", nil
	}
	return "", fmt.Errorf("unknown prefix %q (want query, passage or none)", kind)
}

// Tokenizer is what the encoder needs from a WordPiece tokenizer
// (model/tokenizer.Tokenizer provides it): ids without special tokens, the
// post-processor that adds [CLS] … [SEP], and how many ids it adds.
type Tokenizer interface {
	Encode(text string) []int
	PostProcess(ids []int) []int
	NumSpecialTokens() int
}

// Tokenize turns texts into model inputs as sentence-transformers does:
// prefix + text is encoded, truncated to MaxLen − NumSpecialTokens() ids,
// then wrapped in the special tokens.
func (e *Encoder) Tokenize(tok Tokenizer, texts []string, prefix string) [][]int {
	room := e.opts.MaxLen - tok.NumSpecialTokens()
	out := make([][]int, len(texts))
	for i, t := range texts {
		ids := tok.Encode(prefix + t)
		if len(ids) > room {
			ids = ids[:max(room, 0)]
		}
		out[i] = tok.PostProcess(ids)
	}
	return out
}

// EmbedTexts tokenizes texts with prefix and embeds them: a flat row-major
// [len(texts), Dim()] slice in input order. progress may be nil.
func (e *Encoder) EmbedTexts(tok Tokenizer, texts []string, prefix string, progress func(done, total int)) ([]float32, error) {
	return e.EmbedProgress(e.Tokenize(tok, texts, prefix), progress)
}

// TextFromJSONLine extracts the text of one JSON Lines record: a bare JSON
// string, or an object's first non-empty field among "contents" (wiki-18
// corpus), "text" (with "title" prepended on its own line when present, the
// wiki-18 layout), "question" and "query".
func TextFromJSONLine(line []byte) (string, error) {
	var s string
	if err := json.Unmarshal(line, &s); err == nil {
		return s, nil
	}
	var rec struct {
		Contents, Text, Title, Question, Query *string
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		return "", fmt.Errorf("not a JSON string or object: %w", err)
	}
	switch {
	case rec.Contents != nil:
		return *rec.Contents, nil
	case rec.Text != nil:
		if rec.Title != nil && *rec.Title != "" {
			return `"` + *rec.Title + `"` + "\n" + *rec.Text, nil
		}
		return *rec.Text, nil
	case rec.Question != nil:
		return *rec.Question, nil
	case rec.Query != nil:
		return *rec.Query, nil
	}
	return "", fmt.Errorf(`no "contents", "text", "question" or "query" field`)
}

// EmbedJSONL streams a JSON Lines file of texts (see TextFromJSONLine) to w
// as little-endian float32 vectors, row-major [n, Dim()], in input order.
// Texts are embedded chunkSize at a time (0: 64 batches), so memory stays
// bounded for any corpus size. progress(done) is called after each chunk.
// Blank lines are skipped; any other bad line is an error naming its number.
func (e *Encoder) EmbedJSONL(tok Tokenizer, r io.Reader, w io.Writer, prefix string, chunkSize int, progress func(done int)) (int, error) {
	if chunkSize <= 0 {
		chunkSize = 64 * e.opts.BatchSize
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	var (
		texts []string
		done  int
		buf   []byte
	)
	flush := func() error {
		if len(texts) == 0 {
			return nil
		}
		vecs, err := e.EmbedTexts(tok, texts, prefix, nil)
		if err != nil {
			return err
		}
		buf = buf[:0]
		for _, v := range vecs {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		done += len(texts)
		texts = texts[:0]
		if progress != nil {
			progress(done)
		}
		return nil
	}
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		t, err := TextFromJSONLine(line)
		if err != nil {
			return done, fmt.Errorf("line %d: %w", lineNo, err)
		}
		texts = append(texts, t)
		if len(texts) == chunkSize {
			if err := flush(); err != nil {
				return done, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return done, fmt.Errorf("line %d: %w", lineNo+1, err)
	}
	return done, flush()
}
