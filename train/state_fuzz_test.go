package train

import (
	"encoding/base64"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/testfile"
	"github.com/cas-engine/cas/qa"
)

// FuzzReadTrainerState: any trainer_state.json gives a state that resumes
// (a data cursor the loader can use, an RNG that restores) or an error
// naming the file, never a panic.
func FuzzReadTrainerState(f *testing.F) {
	rng, _ := rand.NewPCG(3, 4).MarshalBinary()
	good := `{"version":1,"step":3,"total_steps":8,"data":{"epoch":1,"pos":2},"rng":"` + b64(rng) + `","weights_dtype":"F32"}`
	for _, s := range []string{good, `{"version":1,"step":-1}`, `{"version":1,"data":{"pos":-5},"rng":"` + b64(rng) + `"}`,
		`{"version":1,"data":{"pos":9223372036854775807},"rng":"` + b64(rng) + `"}`, `{"version":1,"rng":"AAAA"}`, `[]`, `{`, ``} {
		f.Add([]byte(s))
	}
	prompts := []qa.Record{{ID: "a", Question: "q", Answers: []string{"x"}}, {ID: "b", Question: "r", Answers: []string{"y"}}}
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		path := testfile.Write(t, dir, TrainerStateFile, b)
		st, err := ReadTrainerState(dir)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name %s", err, path)
			}
			return
		}
		if err := new(rand.PCG).UnmarshalBinary(st.RNG); err != nil {
			t.Fatalf("accepted an RNG state that does not restore: %v", err)
		}
		l := NewLoader(prompts, 1, true)
		l.SetCursor(st.Data)
		if _, err := l.Next(2); err != nil {
			t.Fatalf("the loader cannot continue from cursor %+v: %v", st.Data, err)
		}
	})
}

// FuzzLatestCheckpoint: any content of checkpoints/latest names a folder
// inside checkpoints/ or is an error, never a panic or an escape.
func FuzzLatestCheckpoint(f *testing.F) {
	for _, s := range []string{"step-000004\n", "../../etc", "step-000001/../../x", "", "step-\x00", "step-000009"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		run := t.TempDir()
		root := filepath.Join(run, CheckpointsDir)
		if err := os.MkdirAll(filepath.Join(root, "step-000004"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "step-000004", TrainerStateFile), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, LatestFile), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		dir, err := LatestCheckpoint(run)
		if err != nil {
			return
		}
		if filepath.Dir(dir) != root {
			t.Fatalf("latest %q resolved to %s, outside %s", s, dir, root)
		}
	})
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
