package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gomlx/gomlx/backends"

	"github.com/cas-engine/cas/backend"
)

// DefaultMemoryLimitMiB is the soft Go heap limit (runtime/debug.SetMemoryLimit)
// that `cas demo` and `cas ablate` set and TestQuickDemo uses. GoMLX's CPU
// backend pools the intermediate buffers of every compiled graph shape in
// sync.Pools; under Go's default pacing (GOGC=100) the pools of shapes not
// in use survive from one collection to the next, and the resident set of
// the demo reached 13.7 GB in the quick run and 17 GB in the default one.
// With the limit the collector runs before the heap gets there and drops
// them: the default run peaks at 5.1 GB, at the same speed.
const DefaultMemoryLimitMiB = 4096

// Options are what a run needs from outside its config.
type Options struct {
	// Backend runs the models; nil picks one (backend.New).
	Backend backends.Backend
	// Progress receives progress bars, Log one-line messages (nil: none).
	Progress io.Writer
	Log      io.Writer
}

// Files of a run folder.
const (
	ConfigFile = "demo.json"   // the run's Config
	ReportFile = "report.md"   // the report
	ResultFile = "result.json" // the Result
	stagesDir  = ".stages"     // one completion marker per stage
	PlotsDir   = "plots"
)

// runner holds one run's state.
type runner struct {
	cfg     Config
	out     string
	opts    Options
	backend backends.Backend
	timings []StageTime
}

// StageTime is the wall time of one stage of this invocation (0 for a
// stage completed by an earlier, interrupted invocation).
type StageTime struct {
	Stage   string  `json:"stage"`
	Seconds float64 `json:"seconds"`
	Resumed bool    `json:"resumed,omitempty"`
}

func newRunner(cfg Config, out string, opts Options) (*runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("demo config: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(out, stagesDir), 0o755); err != nil {
		return nil, err
	}
	if err := checkConfig(filepath.Join(out, ConfigFile), cfg); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, out: out, opts: opts, backend: opts.Backend}
	if r.backend == nil {
		b, err := backend.New()
		if err != nil {
			return nil, fmt.Errorf("backend: %w", err)
		}
		r.backend = b
	}
	return r, nil
}

// checkConfig writes cfg to path, or — when the folder already holds a run
// — checks that it is the same run, so that resuming never mixes settings.
func checkConfig(path string, cfg Config) error {
	want, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	want = append(want, '\n')
	have, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return writeFile(path, want)
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(have, want) {
		return fmt.Errorf("%s holds a different run (other preset, seed or settings): choose another --out or delete the folder", filepath.Dir(path))
	}
	return nil
}

func (r *runner) logf(format string, args ...any) {
	if r.opts.Log != nil {
		fmt.Fprintf(r.opts.Log, format+"\n", args...)
	}
}

// stage runs fn unless the stage's completion marker exists, then writes
// the marker. Everything a stage writes is complete once the marker is
// there; a stage interrupted before it reruns from its start (or from its
// own finer checkpoints).
func (r *runner) stage(ctx context.Context, name string, fn func() error) error {
	marker := filepath.Join(r.out, stagesDir, name)
	if _, err := os.Stat(marker); err == nil {
		r.timings = append(r.timings, StageTime{Stage: name, Resumed: true})
		return nil
	}
	if err := ctx.Err(); err != nil {
		return interrupted(err)
	}
	start := time.Now()
	if err := fn(); err != nil {
		if ctx.Err() != nil {
			return interrupted(errors.Join(ctx.Err(), err))
		}
		return fmt.Errorf("stage %s: %w", name, err)
	}
	sec := time.Since(start).Seconds()
	r.timings = append(r.timings, StageTime{Stage: name, Seconds: sec})
	return writeFile(marker, fmt.Appendf(nil, "{\"seconds\": %.3f}\n", sec))
}

// done reports whether a stage has completed.
func (r *runner) done(name string) bool {
	_, err := os.Stat(filepath.Join(r.out, stagesDir, name))
	return err == nil
}

// ErrInterrupted is wrapped by the error of a run stopped by its context
// (Ctrl-C): everything completed so far is kept, and running the same
// command again resumes.
var ErrInterrupted = errors.New("interrupted: run the same command again to resume")

func interrupted(err error) error { return fmt.Errorf("%w (%v)", ErrInterrupted, err) }

// readJSON reads a JSON file into v.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// writeJSON writes v as indented JSON, atomically.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writeFile(path, append(b, '\n'))
}
