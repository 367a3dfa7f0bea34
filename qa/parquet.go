package qa

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cas-engine/cas/internal/guard"
	"github.com/parquet-go/parquet-go"
)

// ReadParquet reads Search-R1's training parquet (scripts/data_process
// /nq_search.py): rows with "question" and "golden_answers" (the original
// columns, which the processing keeps), or else only verl's columns — the
// question is then the text after the last "Question:" of the user turn in
// "prompt", and the answers are reward_model.ground_truth.target. "id"
// (else extra_info.index, else the row number) and "data_source" are kept.
//
// parquet-go may panic on a corrupt file (a flipped bit in a page index); the
// panic is returned as an error naming the file.
func ReadParquet(r io.ReaderAt, size int64, name string) ([]Record, error) {
	return guard.Value(name, func() ([]Record, error) { return readParquet(r, size, name) })
}

func readParquet(r io.ReaderAt, size int64, name string) ([]Record, error) {
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	rd := parquet.NewReader(f)
	defer rd.Close()
	var out []Record
	for row := 0; ; row++ {
		m := map[string]any{}
		err := rd.Read(&m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", name, row, err)
		}
		p, err := fromParquetRow(m)
		if err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", name, row, err)
		}
		if p.ID == "" {
			p.ID = strconv.Itoa(row)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no questions", name)
	}
	return out, nil
}

func fromParquetRow(m map[string]any) (Record, error) {
	source, _ := m["data_source"].(string)
	question, answers := m["question"], m["golden_answers"]
	if question == nil {
		q, err := questionFromChat(m["prompt"])
		if err != nil {
			return Record{}, err
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
	return fromFields(id, question, answers, source)
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
