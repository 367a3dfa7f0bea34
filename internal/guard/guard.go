// Package guard turns a panic inside a third-party parser into an error
// naming the input, so that corrupt data never crashes the program.
//
// Third-party decoders (parquet-go, yaml.v3, regexp2) are not written to be
// panic-free on hostile input: parquet-go, for one, slices past the end of a
// page index whose length field has one bit flipped. Every call into such a
// parser that reads user data goes through Run.
package guard

import (
	"fmt"
	"runtime"
)

// CorruptError is a parser panic turned into an error.
type CorruptError struct {
	Name  string // the file (or input) being parsed
	Panic any    // the recovered value
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: corrupt or unsupported data (the parser failed: %v)", e.Name, e.Panic)
}

// Run calls fn and returns its error; a panic inside fn becomes a
// *CorruptError naming name. Runtime errors a program cannot recover from
// (out of memory, stack exhaustion) still end it: Go does not let them be
// recovered.
func Run(name string, fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if re, ok := p.(runtime.Error); ok {
				p = re.Error()
			}
			err = &CorruptError{Name: name, Panic: p}
		}
	}()
	return fn()
}

// Value is Run for a function that returns a value.
func Value[T any](name string, fn func() (T, error)) (v T, err error) {
	err = Run(name, func() error {
		var ferr error
		v, ferr = fn()
		return ferr
	})
	return v, err
}
