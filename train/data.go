package train

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/cas-engine/cas/internal/guard"
	"github.com/parquet-go/parquet-go"
)

// Prompt is one training question with its gold answers.
type Prompt struct {
	ID       string   `json:"id"`
	Question string   `json:"question"`
	Answers  []string `json:"golden_answers"`
	// Source is the dataset (Search-R1's data_source, e.g. "nq"); may be empty.
	Source string `json:"data_source,omitempty"`
}

// LoadPrompts reads prompts from FlashRAG/Search-R1 JSONL (.jsonl, .json)
// or Search-R1 parquet (.parquet) files, concatenated in order.
func LoadPrompts(paths ...string) ([]Prompt, error) {
	var out []Prompt
	for _, p := range paths {
		ps, err := loadPromptFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	if len(out) == 0 {
		return nil, errors.New("no prompts")
	}
	return out, nil
}

func loadPromptFile(path string) ([]Prompt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load prompts: %w", err)
	}
	defer f.Close()
	if strings.HasSuffix(strings.ToLower(path), ".parquet") {
		st, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("load prompts: %w", err)
		}
		return ReadPromptsParquet(f, st.Size(), path)
	}
	return ReadPromptsJSONL(f, path)
}

// ReadPromptsJSONL parses FlashRAG/Search-R1 QA JSONL: one object per line
// with "question" (required, non-blank) and "golden_answers" (required: a
// list of strings or one string), "id" (string or number; default: the
// 1-based line number) and optional "data_source". Blank lines are skipped;
// errors name name:line.
func ReadPromptsJSONL(r io.Reader, name string) ([]Prompt, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var out []Prompt
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			p, perr := parsePromptLine(t)
			if perr != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, line, perr)
			}
			if p.ID == "" {
				p.ID = strconv.Itoa(line)
			}
			out = append(out, p)
		}
		if err == io.EOF {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no prompts", name)
	}
	return out, nil
}

func parsePromptLine(b []byte) (Prompt, error) {
	var raw struct {
		ID         any    `json:"id"`
		Question   any    `json:"question"`
		Answers    any    `json:"golden_answers"`
		DataSource string `json:"data_source"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Prompt{}, fmt.Errorf("malformed JSON: %w", err)
	}
	return promptFromFields(raw.ID, raw.Question, raw.Answers, raw.DataSource)
}

// promptFromFields checks and converts decoded fields (JSON or parquet).
func promptFromFields(id, question, answers any, source string) (Prompt, error) {
	q, ok := question.(string)
	if !ok {
		if question == nil {
			return Prompt{}, errors.New(`missing "question"`)
		}
		return Prompt{}, fmt.Errorf(`"question" is %T, want a string`, question)
	}
	q = strings.TrimSpace(q)
	if q == "" {
		return Prompt{}, errors.New(`blank "question"`)
	}
	golds, err := stringList(answers)
	if err != nil {
		return Prompt{}, fmt.Errorf(`"golden_answers": %w`, err)
	}
	p := Prompt{Question: q, Answers: golds, Source: source}
	switch v := id.(type) {
	case nil:
	case string:
		p.ID = v
	case float64:
		p.ID = strconv.FormatFloat(v, 'f', -1, 64)
	case int64:
		p.ID = strconv.FormatInt(v, 10)
	case int32:
		p.ID = strconv.FormatInt(int64(v), 10)
	default:
		return Prompt{}, fmt.Errorf(`"id" is %T, want a string or a number`, id)
	}
	return p, nil
}

// stringList accepts one string or a list of strings (at least one).
func stringList(v any) ([]string, error) {
	switch x := v.(type) {
	case nil:
		return nil, errors.New("missing")
	case string:
		return []string{x}, nil
	case []any:
		out := make([]string, 0, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("element %d is %T, want a string", i, e)
			}
			out = append(out, s)
		}
		if len(out) == 0 {
			return nil, errors.New("empty list")
		}
		return out, nil
	}
	return nil, fmt.Errorf("%T, want a string or a list of strings", v)
}

// ReadPromptsParquet reads Search-R1's training parquet (scripts/data_process
// /nq_search.py): rows with "question" and "golden_answers" (the original
// columns, which the processing keeps), or else only verl's columns — the
// question is then the text after the last "Question:" of the user turn in
// "prompt", and the answers are reward_model.ground_truth.target. "id"
// (else extra_info.index, else the row number) and "data_source" are kept.
//
// parquet-go may panic on a corrupt file (a flipped bit in a page index); the
// panic is returned as an error naming the file.
func ReadPromptsParquet(r io.ReaderAt, size int64, name string) ([]Prompt, error) {
	return guard.Value(name, func() ([]Prompt, error) { return readPromptsParquet(r, size, name) })
}

func readPromptsParquet(r io.ReaderAt, size int64, name string) ([]Prompt, error) {
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rd := parquet.NewReader(f)
	defer rd.Close()
	var out []Prompt
	for row := 0; ; row++ {
		m := map[string]any{}
		err := rd.Read(&m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", name, row, err)
		}
		p, err := promptFromParquetRow(m)
		if err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", name, row, err)
		}
		if p.ID == "" {
			p.ID = strconv.Itoa(row)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no prompts", name)
	}
	return out, nil
}

func promptFromParquetRow(m map[string]any) (Prompt, error) {
	source, _ := m["data_source"].(string)
	question, answers := m["question"], m["golden_answers"]
	if question == nil {
		q, err := questionFromChat(m["prompt"])
		if err != nil {
			return Prompt{}, err
		}
		question = q
	}
	if answers == nil {
		answers = nested(m, "reward_model", "ground_truth", "target")
	}
	id := m["id"]
	if id == nil {
		id = nested(m, "extra_info", "index")
	}
	return promptFromFields(id, question, answers, source)
}

// nested follows keys through nested maps.
func nested(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// questionFromChat extracts the question from verl's "prompt" column (a
// list of {"role", "content"}): the text after the last "Question:" of the
// last user turn, up to the end of that line.
func questionFromChat(v any) (string, error) {
	turns, ok := v.([]any)
	if !ok || len(turns) == 0 {
		return "", errors.New(`neither "question" nor a "prompt" chat column`)
	}
	for i := len(turns) - 1; i >= 0; i-- {
		t, _ := turns[i].(map[string]any)
		if role, _ := t["role"].(string); role != "user" {
			continue
		}
		content, _ := t["content"].(string)
		k := strings.LastIndex(content, "Question:")
		if k < 0 {
			return "", errors.New(`user turn of "prompt" has no "Question:"`)
		}
		q := content[k+len("Question:"):]
		if nl := strings.IndexByte(q, '\n'); nl >= 0 {
			q = q[:nl]
		}
		return q, nil
	}
	return "", errors.New(`"prompt" has no user turn`)
}

// Cursor is the position of a Loader: the epoch (0-based) and the index of
// the next prompt within that epoch's order.
type Cursor struct {
	Epoch int `json:"epoch"`
	Pos   int `json:"pos"`
}

// Loader hands out batches of prompts epoch after epoch, each epoch in a
// fresh permutation drawn from (seed, epoch) when shuffling, so that a
// cursor alone restores its position exactly. A batch never spans two
// epochs: an epoch's last partial batch is dropped (verl's drop_last).
type Loader struct {
	prompts []Prompt
	seed    uint64
	shuffle bool
	cur     Cursor
	order   []int // permutation of the current epoch
}

// NewLoader returns a loader at epoch 0, position 0.
func NewLoader(prompts []Prompt, seed uint64, shuffle bool) *Loader {
	l := &Loader{prompts: prompts, seed: seed, shuffle: shuffle}
	l.SetCursor(Cursor{})
	return l
}

// Len is the number of prompts.
func (l *Loader) Len() int { return len(l.prompts) }

// Cursor returns the current position.
func (l *Loader) Cursor() Cursor { return l.cur }

// SetCursor moves to a position.
func (l *Loader) SetCursor(c Cursor) {
	l.cur = c
	l.order = l.epochOrder(c.Epoch)
}

func (l *Loader) epochOrder(epoch int) []int {
	n := len(l.prompts)
	if !l.shuffle {
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		return order
	}
	return rand.New(rand.NewPCG(l.seed, uint64(epoch)+0x6a09e667f3bcc908)).Perm(n)
}

// Next returns the next batch of n prompts.
func (l *Loader) Next(n int) ([]Prompt, error) {
	if n < 1 || n > len(l.prompts) {
		return nil, fmt.Errorf("data: batch of %d prompts from %d", n, len(l.prompts))
	}
	if l.cur.Pos+n > len(l.order) {
		l.SetCursor(Cursor{Epoch: l.cur.Epoch + 1})
	}
	out := make([]Prompt, n)
	for i := range out {
		out[i] = l.prompts[l.order[l.cur.Pos+i]]
	}
	l.cur.Pos += n
	return out, nil
}

// DrawPrompts picks n distinct prompts with a seeded draw (all of them, in
// order, when n ≥ len(prompts)).
func DrawPrompts(prompts []Prompt, n int, seed uint64) []Prompt {
	if n >= len(prompts) {
		return append([]Prompt(nil), prompts...)
	}
	perm := rand.New(rand.NewPCG(seed, 0xbb67ae8584caa73b)).Perm(len(prompts))
	out := make([]Prompt, n)
	for i := range out {
		out[i] = prompts[perm[i]]
	}
	return out
}
