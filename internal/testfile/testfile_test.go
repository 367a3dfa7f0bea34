package testfile

import (
	"testing"
)

// TestReadJSONL: Write then ReadJSONL gives the records in order, blank
// lines skipped.
func TestReadJSONL(t *testing.T) {
	type rec struct {
		ID    int       `json:"id"`
		Score []float32 `json:"score"`
	}
	p := Write(t, t.TempDir(), "r.jsonl", []byte("{\"id\":1,\"score\":[0.5]}\n\n  \n{\"id\":2}"))
	got := ReadJSONL[rec](t, p)
	if len(got) != 2 || got[0].ID != 1 || got[0].Score[0] != 0.5 || got[1].ID != 2 || got[1].Score != nil {
		t.Errorf("ReadJSONL = %+v", got)
	}
}
