package demo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/backends"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/train"
)

// Warm-start saves, inside the run folder:
//
//	warm-saves/step-000300/        one complete save:
//	    model/                     the policy (config.json, model.safetensors F32, …)
//	    optimizer.safetensors      AdamW moments and step counter
//	    warm_state.json            the report so far and the sampler's RNG and epoch
//	warm-saves/latest              the name of the committed save
//
// A save is written into a hidden temporary folder (every file synced),
// renamed into place, the parent synced, and only then does "latest" move
// to it (temporary file, sync, rename, sync); older saves are removed last.
// A kill at any instruction therefore leaves "latest" naming a complete
// save, from which the warm start resumes exactly: same weights, same
// AdamW moments, same next batch.
const (
	warmSavesDir    = "warm-saves"
	warmLatestFile  = "latest"
	warmModelDir    = "model"
	warmStateFile   = "warm_state.json"
	warmSavePrefix  = "step-"
	warmSaveTmpGlob = ".step-*.tmp-*"
)

// warmState is warm_state.json.
type warmState struct {
	Report WarmReport     `json:"report"`
	SFT    train.SFTState `json:"sft"`
}

// warmSaver writes and reads the saves of one warm start. crash, when set
// (tests only), is called at each point of a save where a kill would leave
// a different state on disk; an error from it stops the save there, as a
// SIGKILL would.
type warmSaver struct {
	root    string // warm-saves
	tokPath string
	crash   func(point string) error
}

func (ws *warmSaver) hook(point string) error {
	if ws.crash == nil {
		return nil
	}
	return ws.crash(point)
}

// save commits step's save: policy, optimiser state and st.
func (ws *warmSaver) save(policy *qwen.Model, st warmState) error {
	if err := os.MkdirAll(ws.root, 0o755); err != nil {
		return fmt.Errorf("warm save: %w", err)
	}
	name := warmSavePrefix + fmt.Sprintf("%06d", st.Report.Steps)
	final := filepath.Join(ws.root, name)
	d, err := atomicfile.CreateDir(final) // replaces a save of this step from a run resumed before it
	if err != nil {
		return fmt.Errorf("warm save: %w", err)
	}
	tmp := d.Path()
	fail := func(err error) error {
		d.Abort()
		return fmt.Errorf("warm save of step %d: %w", st.Report.Steps, err)
	}
	if err := SaveModelFolder(filepath.Join(tmp, warmModelDir), policy, ws.tokPath); err != nil {
		return fail(err)
	}
	if err := ws.hook("model written"); err != nil {
		return err
	}
	if err := train.SaveOptimizerState(policy.Context(), filepath.Join(tmp, train.OptimizerFile)); err != nil {
		return fail(err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fail(err)
	}
	if err := atomicfile.WriteFile(filepath.Join(tmp, warmStateFile), append(b, '\n')); err != nil {
		return fail(err)
	}
	if err := ws.hook("folder written"); err != nil {
		return err
	}
	if err := d.Commit(); err != nil {
		return fmt.Errorf("warm save of step %d: %w", st.Report.Steps, err)
	}
	if err := ws.hook("folder renamed"); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(ws.root, warmLatestFile), []byte(name+"\n")); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(ws.root); err != nil {
		return err
	}
	if err := ws.hook("latest moved"); err != nil {
		return err
	}
	return ws.prune(name)
}

// prune removes every save but keep and leftover temporary folders.
func (ws *warmSaver) prune(keep string) error {
	entries, err := os.ReadDir(ws.root)
	if err != nil {
		return fmt.Errorf("warm saves: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		if n == keep || n == warmLatestFile || !e.IsDir() {
			continue
		}
		if strings.HasPrefix(n, warmSavePrefix) || strings.HasPrefix(n, "."+warmSavePrefix) {
			if err := os.RemoveAll(filepath.Join(ws.root, n)); err != nil {
				return fmt.Errorf("warm saves: remove %s: %w", n, err)
			}
		}
	}
	return nil
}

// latest returns the committed save's folder and state; ok is false when
// there is none (a warm start that never saved). Saves that were written
// but not committed, and temporary folders, are removed.
func (ws *warmSaver) latest() (dir string, st warmState, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(ws.root, warmLatestFile))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(ws.root); serr == nil {
			err = ws.prune("") // only uncommitted saves
		} else {
			err = nil
		}
		return "", st, false, err
	}
	if err != nil {
		return "", st, false, fmt.Errorf("warm saves: %w", err)
	}
	name := strings.TrimSpace(string(b))
	step, cerr := strconv.Atoi(strings.TrimPrefix(name, warmSavePrefix))
	if cerr != nil || step < 0 || name != warmSavePrefix+fmt.Sprintf("%06d", step) {
		return "", st, false, fmt.Errorf("%s: bad save name %.40q", filepath.Join(ws.root, warmLatestFile), name)
	}
	dir = filepath.Join(ws.root, name)
	if err := readJSON(filepath.Join(dir, warmStateFile), &st); err != nil {
		return "", st, false, fmt.Errorf("warm save %s: %w", dir, err)
	}
	if st.Report.Steps != step || len(st.Report.Losses) != step {
		return "", st, false, fmt.Errorf("warm save %s: state of step %d with %d losses", dir, st.Report.Steps, len(st.Report.Losses))
	}
	if err := ws.prune(name); err != nil {
		return "", st, false, err
	}
	return dir, st, true, nil
}

// load restores a save's policy with its optimiser state.
func (ws *warmSaver) load(dir string, b backends.Backend) (*qwen.Model, error) {
	policy, err := LoadModelFolder(filepath.Join(dir, warmModelDir), b)
	if err != nil {
		return nil, err
	}
	if err := train.RestoreOptimizerState(policy.Context(), dir); err != nil {
		return nil, err
	}
	return policy, nil
}
