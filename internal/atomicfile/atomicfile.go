// Package atomicfile writes files and folders so that a reader never sees a
// half-written one: the content goes to a synced temporary file (or folder)
// next to the destination, which is then renamed over it. On any error the
// temporary is removed and the destination is left as it was. It is the
// project's one temp-file-and-rename writer.
//
// (github.com/google/renameio/v2 does the file half of this, but builds on
// no Windows and has no folder commit; this package is the few lines both
// need, portable.)
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File is a temporary file that becomes path on Commit. It is an *os.File,
// so it can be written in order, by offset (WriteAt) and read back.
type File struct {
	*os.File
	path string
	done bool
}

// Create opens a temporary file next to path (".NAME.tmp-*").
func Create(path string) (*File, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &File{File: f, path: path}, nil
}

// Commit makes the file readable by all (0644), syncs it and renames it
// over the destination. On error the temporary file is removed.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("write %s: already committed or aborted", f.path)
	}
	f.done = true
	name := f.Name()
	err := f.Chmod(0o644)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, f.path)
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	return nil
}

// Abort closes and removes the temporary file; after Commit it does nothing.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.Close()
	os.Remove(f.Name())
}

// Write runs fill on a buffered temporary file next to path, syncs it, and
// renames it over path (mode 0644).
func Write(path string, fill func(io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		f.Abort()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// WriteFile writes b to path atomically (see Write).
func WriteFile(path string, b []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// Copy copies the file from to path to atomically (see Write).
func Copy(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	return Write(to, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// SyncDir fsyncs a directory so that renames into it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Dir is a temporary folder that replaces the folder path on Commit.
type Dir struct {
	tmp, path string
	done      bool
}

// TmpPattern is the name pattern (for filepath.Glob in the parent folder)
// of the temporary files and folders this package leaves behind when a
// process is killed mid-write: ".NAME.tmp-*".
func TmpPattern(name string) string { return "." + name + ".tmp-*" }

// CreateDir creates the parent of path if needed and a temporary folder
// (mode 0755) next to path (".NAME.tmp-*") to fill through Path.
func CreateDir(path string) (*Dir, error) {
	parent := filepath.Dir(path)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	tmp, err := os.MkdirTemp(parent, TmpPattern(filepath.Base(path)))
	if err == nil {
		err = os.Chmod(tmp, 0o755) // MkdirTemp makes it 0700
		if err != nil {
			os.RemoveAll(tmp)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &Dir{tmp: tmp, path: path}, nil
}

// Path is the temporary folder to write into.
func (d *Dir) Path() string { return d.tmp }

// Commit syncs the temporary folder and renames it to path. A folder
// already at path is first moved aside (to a ".NAME.tmp-old-*" name, which
// TmpPattern matches) and removed once the new one is in place, so a kill
// at any point leaves either folder complete, never a half-removed one. On
// error the temporary folder is removed.
func (d *Dir) Commit() error {
	if d.done {
		return fmt.Errorf("write %s: already committed or aborted", d.path)
	}
	d.done = true
	if err := d.commit(); err != nil {
		os.RemoveAll(d.tmp)
		return fmt.Errorf("write %s: %w", d.path, err)
	}
	return nil
}

func (d *Dir) commit() error {
	if err := SyncDir(d.tmp); err != nil {
		return err
	}
	parent := filepath.Dir(d.path)
	var old string
	if _, err := os.Lstat(d.path); err == nil {
		// A name no one else uses: create it, free it, rename onto it.
		o, err := os.MkdirTemp(parent, "."+filepath.Base(d.path)+".tmp-old-*")
		if err != nil {
			return err
		}
		if err := os.Remove(o); err != nil {
			return err
		}
		if err := os.Rename(d.path, o); err != nil {
			return err
		}
		old = o
	}
	if err := os.Rename(d.tmp, d.path); err != nil {
		if old != "" {
			os.Rename(old, d.path)
		}
		return err
	}
	if err := SyncDir(parent); err != nil {
		return err
	}
	if old != "" {
		return os.RemoveAll(old)
	}
	return nil
}

// Abort removes the temporary folder; after Commit it does nothing.
func (d *Dir) Abort() {
	if d.done {
		return
	}
	d.done = true
	os.RemoveAll(d.tmp)
}
