// Package loadfile reads a file and parses its bytes, with one error form
// for both steps: "load PATH: err". It is the read-then-parse step behind
// the loaders of configs, calibration files, score files and checkpoint
// state.
package loadfile

import (
	"encoding/json"
	"fmt"
	"os"
)

// Parse reads the file path and returns parse of its contents; a read or
// parse error is returned as "load PATH: err" (wrapped, so errors.Is sees
// os.ErrNotExist and parse's sentinel errors).
func Parse[T any](path string, parse func([]byte) (T, error)) (T, error) {
	var zero T
	data, err := os.ReadFile(path)
	if err != nil {
		return zero, fmt.Errorf("load %s: %w", path, err)
	}
	v, err := parse(data)
	if err != nil {
		return zero, fmt.Errorf("load %s: %w", path, err)
	}
	return v, nil
}

// JSON is Parse with encoding/json: the file's JSON value decoded into a T
// (unknown keys ignored, as json.Unmarshal does).
func JSON[T any](path string) (T, error) {
	return Parse(path, func(b []byte) (T, error) {
		var v T
		err := json.Unmarshal(b, &v)
		return v, err
	})
}
