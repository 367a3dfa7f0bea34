package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	for _, want := range []string{"first", "second, longer"} {
		if err := WriteFile(path, []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
}

func TestWriteFailureLeavesOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	if err := WriteFile(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error {
		w.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != "old" {
		t.Fatalf("destination changed to %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("%d files left in the directory, want 1 (temporary file not removed)", len(entries))
	}
}

func TestWriteMissingDir(t *testing.T) {
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "f"), nil); err == nil {
		t.Fatal("want an error for a missing directory")
	}
}

func TestCopy(t *testing.T) {
	dir := t.TempDir()
	from, to := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(from, []byte("payload"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Copy(from, to); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(to); err != nil || string(got) != "payload" {
		t.Fatalf("copy holds %q (%v), want %q", got, err, "payload")
	}
	if err := Copy(filepath.Join(dir, "missing"), to); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("copy of a missing file: %v, want ErrNotExist", err)
	}
	if got, _ := os.ReadFile(to); string(got) != "payload" {
		t.Fatalf("failed copy changed the destination to %q", got)
	}
}
