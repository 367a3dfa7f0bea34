// Package jsonl walks the lines of a JSON-lines stream: the one loop behind
// every JSONL reader (QA files, warm-start files, metrics), with errors
// that name the stream and the line.
package jsonl

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrStop, returned by fn, ends Lines early without an error.
var ErrStop = errors.New("jsonl: stop")

// Lines calls fn with the 1-based number and the whitespace-trimmed text of
// every non-blank line of r, in order; last tells fn that the line is the
// stream's final one and has no terminating newline (a line a writer may
// have torn). A read error or an error of fn (other than ErrStop) is
// returned as "name:line: err".
func Lines(r io.Reader, name string, fn func(line int, text []byte, last bool) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			if ferr := fn(line, t, err == io.EOF); ferr != nil {
				if errors.Is(ferr, ErrStop) {
					return nil
				}
				return fmt.Errorf("%s:%d: %w", name, line, ferr)
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}
