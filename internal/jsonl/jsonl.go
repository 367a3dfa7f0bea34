// Package jsonl walks the lines of a JSON-lines stream: the one loop behind
// every JSONL reader (QA files, warm-start files, metrics, conformal's
// score files, the world's corpus and questions), with errors that name
// the line (and, with Lines, the stream).
package jsonl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrStop, returned by fn, ends Lines early without an error.
var ErrStop = errors.New("jsonl: stop")

// Lines calls fn with the 1-based number and the whitespace-trimmed text of
// every non-blank line of r, in order; last tells fn that the line is the
// stream's final one and has no terminating newline (a line a writer may
// have torn). A read error or an error of fn (other than ErrStop) is
// returned as "name:line: err".
func Lines(r io.Reader, name string, fn func(line int, text []byte, last bool) error) error {
	err := walk(r, func(line int, text []byte, last bool) error {
		if ferr := fn(line, text, last); ferr != nil {
			if errors.Is(ferr, ErrStop) {
				return ErrStop
			}
			return fmt.Errorf("%s:%d: %w", name, line, ferr)
		}
		return nil
	}, func(line int, err error) error { return fmt.Errorf("%s:%d: %w", name, line, err) })
	if err == ErrStop {
		return nil
	}
	return err
}

// Each is Lines for readers whose fn names the line itself: it calls fn
// with the 1-based number and trimmed text of every non-blank line and
// returns fn's first error unchanged; a read error is returned as
// "line N: err".
func Each(r io.Reader, fn func(line int, text []byte) error) error {
	return walk(r, func(line int, text []byte, _ bool) error { return fn(line, text) },
		func(line int, err error) error { return fmt.Errorf("line %d: %w", line, err) })
}

// walk is the loop of Lines and Each: fn's error is returned as it is,
// a read error through readErr.
func walk(r io.Reader, fn func(line int, text []byte, last bool) error, readErr func(line int, err error) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return readErr(line, err)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			if ferr := fn(line, t, err == io.EOF); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// Collect is Lines for readers of one record a line: it returns what
// parse makes of every non-blank line, in order, with parse's error as
// "name:line: err"; a stream without a record is the error none (nil: an
// empty result is fine).
func Collect[T any](r io.Reader, name string, none error, parse func(line int, text []byte) (T, error)) ([]T, error) {
	return collect(func(fn func(int, []byte) error) error {
		return Lines(r, name, func(line int, text []byte, _ bool) error { return fn(line, text) })
	}, none, parse)
}

// CollectEach is Collect for parsers whose errors name the line
// themselves (as Each): parse's error is returned unchanged.
func CollectEach[T any](r io.Reader, none error, parse func(line int, text []byte) (T, error)) ([]T, error) {
	return collect(func(fn func(int, []byte) error) error { return Each(r, fn) }, none, parse)
}

func collect[T any](walk func(func(line int, text []byte) error) error, none error, parse func(int, []byte) (T, error)) ([]T, error) {
	var out []T
	err := walk(func(line int, text []byte) error {
		x, err := parse(line, text)
		if err != nil {
			return err
		}
		out = append(out, x)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 && none != nil {
		return nil, none
	}
	return out, nil
}

// ReadFile opens path and parses it with read, naming the file in a parse
// error ("read PATH: err"); the error of a file that cannot be opened
// names it already.
func ReadFile[T any](path string, read func(io.Reader) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, err
	}
	defer f.Close()
	v, err := read(f)
	if err != nil {
		return zero, fmt.Errorf("read %s: %w", path, err)
	}
	return v, nil
}
