// Package qa reads question–answer data sets (FlashRAG/Search-R1 JSONL and
// Search-R1's training parquet) into the one record every stage uses: APS
// calibration, rollouts, ACI bootstrap, training and evaluation.
package qa

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/cas-engine/cas/internal/jsonl"
)

// Record is one question of a QA data set with its gold answers: a
// training prompt, an ACI calibration prompt, an APS calibration question or
// an evaluation question (FlashRAG/Search-R1's {"id", "question",
// "golden_answers"}).
type Record struct {
	ID       string   `json:"id"`
	Question string   `json:"question"`
	Answers  []string `json:"golden_answers"`
	// Source is the dataset (Search-R1's data_source, e.g. "nq"); may be empty.
	Source string `json:"data_source,omitempty"`
}

// Load reads the records of FlashRAG/Search-R1 JSONL (.jsonl, .json)
// or Search-R1 parquet (.parquet) files, concatenated in order.
func Load(paths ...string) ([]Record, error) {
	var out []Record
	for _, p := range paths {
		rs, err := loadFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	if len(out) == 0 {
		return nil, errors.New("no questions")
	}
	return out, nil
}

func loadFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load QA: %w", err)
	}
	defer f.Close()
	if strings.HasSuffix(strings.ToLower(path), ".parquet") {
		st, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("load QA: %w", err)
		}
		return ReadParquet(f, st.Size(), path)
	}
	return ReadJSONL(f, path)
}

// ReadJSONL parses FlashRAG/Search-R1 QA JSONL: one object per line
// with "question" (required, non-blank) and "golden_answers" (required: a
// list of strings or one string), "id" (string or number; default: the
// 1-based line number) and optional "data_source". Blank lines are skipped;
// errors name name:line.
func ReadJSONL(r io.Reader, name string) ([]Record, error) {
	return jsonl.Collect(r, name, fmt.Errorf("%s: no questions", name), func(line int, b []byte) (Record, error) {
		p, err := parseLine(b)
		if err != nil {
			return Record{}, err
		}
		if p.ID == "" {
			p.ID = strconv.Itoa(line)
		}
		return p, nil
	})
}

func parseLine(b []byte) (Record, error) {
	var raw struct {
		ID         any    `json:"id"`
		Question   any    `json:"question"`
		Answers    any    `json:"golden_answers"`
		DataSource string `json:"data_source"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Record{}, fmt.Errorf("malformed JSON: %w", err)
	}
	return fromFields(raw.ID, raw.Question, raw.Answers, raw.DataSource)
}

// fromFields checks and converts decoded fields (JSON or parquet).
func fromFields(id, question, answers any, source string) (Record, error) {
	q, ok := question.(string)
	if !ok {
		if question == nil {
			return Record{}, errors.New(`missing "question"`)
		}
		return Record{}, fmt.Errorf(`"question" is %T, want a string`, question)
	}
	q = strings.TrimSpace(q)
	if q == "" {
		return Record{}, errors.New(`blank "question"`)
	}
	golds, err := stringList(answers)
	if err != nil {
		return Record{}, fmt.Errorf(`"golden_answers": %w`, err)
	}
	r := Record{Question: q, Answers: golds, Source: source}
	switch v := id.(type) {
	case nil:
	case string:
		r.ID = v
	case float64:
		r.ID = strconv.FormatFloat(v, 'f', -1, 64)
	case int64:
		r.ID = strconv.FormatInt(v, 10)
	case int32:
		r.ID = strconv.FormatInt(int64(v), 10)
	default:
		return Record{}, fmt.Errorf(`"id" is %T, want a string or a number`, id)
	}
	return r, nil
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
