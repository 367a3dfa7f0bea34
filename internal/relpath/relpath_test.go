package relpath

import (
	"path/filepath"
	"testing"
)

func TestStoreResolveRoundTrip(t *testing.T) {
	base := t.TempDir()
	run := filepath.Join(base, "demo", "grpo", "cas")
	tests := []struct {
		name, root, target, want string
	}{
		{"inside the holder", "", filepath.Join(run, "checkpoints", "x"), "checkpoints/x"},
		{"outside, no root: absolute", "", filepath.Join(base, "demo", "world", "train.jsonl"), filepath.Join(base, "demo", "world", "train.jsonl")},
		{"outside the holder, inside the root", filepath.Join(base, "demo"), filepath.Join(base, "demo", "world", "train.jsonl"), "../../world/train.jsonl"},
		{"outside the root: absolute", filepath.Join(base, "demo"), filepath.Join(base, "shared", "q.jsonl"), filepath.Join(base, "shared", "q.jsonl")},
		{"url unchanged", "", "http://127.0.0.1:8000", "http://127.0.0.1:8000"},
		{"empty unchanged", "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Store(run, tc.root, tc.target)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Store = %q, want %q", got, tc.want)
			}
			if back := Resolve(run, got); back != tc.target {
				t.Fatalf("Resolve(Store) = %q, want %q", back, tc.target)
			}
		})
	}
}

func TestStoreRelativeTargetIsCwdRelative(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	got, err := Store("runs/demo/grpo/cas", "runs/demo", "runs/demo/world/train.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if got != "../../world/train.jsonl" {
		t.Fatalf("Store = %q", got)
	}
}

func TestInside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx")
	tests := []struct {
		p      string
		ok     bool
		absOK  bool
		expect string
	}{
		{"bm25.idx", true, true, filepath.Join(dir, "bm25.idx")},
		{"vectors/index.cas", true, true, filepath.Join(dir, "vectors", "index.cas")},
		{"a/../b", true, true, filepath.Join(dir, "b")},
		{"../../../../etc/passwd", false, false, ""},
		{"..", false, false, ""},
		{"/etc/passwd", false, true, "/etc/passwd"},
		{"", false, false, ""},
	}
	for _, tc := range tests {
		got, err := Inside(dir, "index", tc.p)
		if (err == nil) != tc.ok || (tc.ok && got != tc.expect) {
			t.Errorf("Inside(%q) = %q, %v; want ok=%v %q", tc.p, got, err, tc.ok, tc.expect)
		}
		got, err = InsideOrAbs(dir, "corpus", tc.p)
		if (err == nil) != tc.absOK || (tc.absOK && got != tc.expect) {
			t.Errorf("InsideOrAbs(%q) = %q, %v; want ok=%v %q", tc.p, got, err, tc.absOK, tc.expect)
		}
	}
}
