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

func TestFileWriteAtCommitAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "index.cas")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8); err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"5678", "1234"} { // by offset, out of order
		if _, err := f.WriteAt([]byte(s), int64(4-4*i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("destination exists before Commit: %v", err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort() // after Commit: nothing
	if got, err := os.ReadFile(path); err != nil || string(got) != "12345678" {
		t.Fatalf("read %q, %v", got, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	if err := f.Commit(); err == nil {
		t.Error("second Commit succeeded")
	}
	g, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	g.Write([]byte("half"))
	g.Abort()
	if got, _ := os.ReadFile(path); string(got) != "12345678" {
		t.Fatalf("aborted write changed the destination to %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d entries left, want 1", len(entries))
	}
}

func TestDirReplaces(t *testing.T) {
	parent := t.TempDir()
	path := filepath.Join(parent, "sub", "step-000003")
	for _, want := range []string{"first", "second"} {
		d, err := CreateDir(path)
		if err != nil {
			t.Fatal(err)
		}
		if matched, _ := filepath.Match(TmpPattern("step-000003"), filepath.Base(d.Path())); !matched {
			t.Errorf("temporary %s does not match TmpPattern", d.Path())
		}
		if err := os.WriteFile(filepath.Join(d.Path(), "f"), []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := d.Commit(); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(path, "f")); err != nil || string(got) != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o755 {
			t.Errorf("mode %v, want 0755", st.Mode().Perm())
		}
		if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
			t.Fatalf("%d entries beside the folder, want none (temporary or old copy left)", len(entries)-1)
		}
	}
	d, err := CreateDir(path)
	if err != nil {
		t.Fatal(err)
	}
	d.Abort()
	if err := d.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	if got, _ := os.ReadFile(filepath.Join(path, "f")); string(got) != "second" {
		t.Fatalf("aborted folder changed the destination to %q", got)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Fatalf("%d entries beside the folder after Abort", len(entries)-1)
	}
}
