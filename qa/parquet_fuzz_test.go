package qa

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/guard"
	"github.com/parquet-go/parquet-go"
)

// searchR1ParquetBytes is a two-row Search-R1 parquet file (the full layout).
func searchR1ParquetBytes(t testing.TB) []byte {
	t.Helper()
	rows := []searchR1Full{
		{ID: "train_0", Question: "total number of death row inmates in the us?", GoldenAnswers: []string{"2,718"}, DataSource: "nq",
			Prompt:      []searchR1Msg{{searchR1Prompt("total number of death row inmates in the us?"), "user"}},
			RewardModel: searchR1Reward{searchR1Truth{[]string{"2,718"}}, "rule"}, ExtraInfo: searchR1Extra{0, "train"}},
		{ID: "train_1", Question: "big little lies season 2 how many episodes?", GoldenAnswers: []string{"seven", "7"}, DataSource: "hotpotqa",
			Prompt:      []searchR1Msg{{searchR1Prompt("big little lies season 2 how many episodes?"), "user"}},
			RewardModel: searchR1Reward{searchR1Truth{[]string{"seven", "7"}}, "rule"}, ExtraInfo: searchR1Extra{1, "train"}},
	}
	var buf bytes.Buffer
	if err := parquet.Write(&buf, rows); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReadParquetBitFlips flips one bit in every byte of a valid
// parquet file (bit i mod 8 of byte i): no mutant may panic, and every
// failure names the file. parquet-go panics on some of them (a page index
// sliced past its end); those come back as *guard.CorruptError.
func TestReadParquetBitFlips(t *testing.T) {
	orig := searchR1ParquetBytes(t)
	var failed, recovered int
	for i := range orig {
		b := bytes.Clone(orig)
		b[i] ^= 1 << (i % 8)
		_, err := ReadParquet(bytes.NewReader(b), int64(len(b)), "mutant.parquet")
		if err == nil {
			continue
		}
		failed++
		if !strings.Contains(err.Error(), "mutant.parquet") {
			t.Fatalf("byte %d: error %q does not name the file", i, err)
		}
		if _, ok := errors.AsType[*guard.CorruptError](err); ok {
			recovered++
		}
	}
	t.Logf("%d one-bit mutants of a %d-byte file: %d rejected, %d of them parser panics turned into errors", len(orig), len(orig), failed, recovered)
	if failed == 0 {
		t.Fatal("no mutant was rejected: the test does not exercise the reader")
	}
}

// FuzzReadParquet: any bytes give prompts or an error naming the
// file, never a panic.
func FuzzReadParquet(f *testing.F) {
	orig := searchR1ParquetBytes(f)
	f.Add(orig)
	f.Add(orig[:len(orig)/2])
	f.Add([]byte("PAR1PAR1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := ReadParquet(bytes.NewReader(b), int64(len(b)), "fuzz.parquet")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.parquet") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, p := range ps {
			if strings.TrimSpace(p.Question) == "" || len(p.Answers) == 0 || p.ID == "" {
				t.Fatalf("accepted an incomplete prompt %+v", p)
			}
		}
	})
}
