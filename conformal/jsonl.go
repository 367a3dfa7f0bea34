package conformal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cas-engine/cas/internal/jsonl"
)

// ReadQueries parses APS calibration/inference queries from JSONL, one query
// per line:
//
//	{"scores": [s_1, …, s_n], "gold": k}
//
// scores are raw retrieval scores in retrieval order (finite, at least one);
// gold is the 0-based index of the gold document in that list, or −1 when the
// gold document is not among the candidates. With requireGold false the
// "gold" field may be omitted (it is then NoGold), as for inference input.
// Blank lines are skipped and other fields are ignored. Errors name the
// 1-based line.
func ReadQueries(r io.Reader, requireGold bool) ([]Query, error) {
	return jsonl.CollectEach(r, errors.New("no queries (empty input)"), func(line int, b []byte) (Query, error) {
		var raw struct {
			Scores []float64 `json:"scores"`
			Gold   *int      `json:"gold"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			return Query{}, fmt.Errorf("line %d: malformed JSON: %w", line, err)
		}
		if err := checkScores(raw.Scores); err != nil {
			return Query{}, fmt.Errorf("line %d: %w", line, err)
		}
		q := Query{Scores: raw.Scores, Gold: NoGold}
		switch {
		case raw.Gold != nil:
			q.Gold = *raw.Gold
		case requireGold:
			return Query{}, fmt.Errorf("line %d: missing \"gold\" (use -1 when the gold document is absent)", line)
		}
		if q.Gold != NoGold && (q.Gold < 0 || q.Gold >= len(q.Scores)) {
			return Query{}, fmt.Errorf("line %d: gold index %d out of range [0, %d) (use -1 for no gold)", line, q.Gold, len(q.Scores))
		}
		return q, nil
	})
}

// ReadScoreLines parses JSONL with one score list per line,
//
//	{"scores": [s_1, …, s_B]}
//
// as the ACI CLI takes training steps (and bootstrap scores). Every list must
// be non-empty and finite; blank lines are skipped; errors name the 1-based
// line.
func ReadScoreLines(r io.Reader) ([][]float64, error) {
	return jsonl.CollectEach(r, errors.New("no score lines (empty input)"), func(line int, b []byte) ([]float64, error) {
		var raw struct {
			Scores []float64 `json:"scores"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, fmt.Errorf("line %d: malformed JSON: %w", line, err)
		}
		if err := checkScores(raw.Scores); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		return raw.Scores, nil
	})
}
