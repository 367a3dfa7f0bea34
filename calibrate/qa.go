package calibrate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// QA is one question of a FlashRAG/Search-R1 QA file:
// {"id": ..., "question": ..., "golden_answers": [...]}.
type QA struct {
	ID       string
	Question string
	Answers  []string
}

// LoadQA reads a QA JSONL file.
func LoadQA(path string) ([]QA, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load QA: %w", err)
	}
	defer f.Close()
	return ReadQA(f, path)
}

// ReadQA parses QA JSONL. "golden_answers" may be a list of strings or one
// string; "id" a string or a number (missing: the 1-based line number).
// Blank lines are skipped; errors name name:line.
func ReadQA(r io.Reader, name string) ([]QA, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var out []QA
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			q, perr := parseQA(t)
			if perr != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, line, perr)
			}
			if q.ID == "" {
				q.ID = fmt.Sprint(line)
			}
			out = append(out, q)
		}
		if err == io.EOF {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no questions", name)
	}
	return out, nil
}

func parseQA(b []byte) (QA, error) {
	var raw struct {
		ID       json.RawMessage `json:"id"`
		Question *string         `json:"question"`
		Answers  json.RawMessage `json:"golden_answers"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return QA{}, fmt.Errorf("malformed JSON: %w", err)
	}
	if raw.Question == nil {
		return QA{}, errors.New(`missing "question"`)
	}
	q := QA{Question: *raw.Question}
	if id := bytes.TrimSpace(raw.ID); len(id) > 0 && string(id) != "null" {
		var s string
		if json.Unmarshal(id, &s) == nil {
			q.ID = s
		} else {
			var n json.Number
			if err := json.Unmarshal(id, &n); err != nil {
				return QA{}, errors.New(`"id" must be a string or a number`)
			}
			q.ID = n.String()
		}
	}
	if len(bytes.TrimSpace(raw.Answers)) == 0 {
		return QA{}, errors.New(`missing "golden_answers"`)
	}
	var one string
	if json.Unmarshal(raw.Answers, &one) == nil {
		q.Answers = []string{one}
	} else if err := json.Unmarshal(raw.Answers, &q.Answers); err != nil {
		return QA{}, errors.New(`"golden_answers" must be a list of strings`)
	}
	return q, nil
}
