package train

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/internal/loadfile"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/safetensors"
)

// Checkpoint layout inside a run folder:
//
//	checkpoints/step-000100/   a Hugging Face model folder plus the trainer's state:
//	    config.json, generation_config.json, tokenizer*.json …  (copied from the initial model)
//	    model.safetensors      policy weights, F32 (exact resume) or BF16
//	    optimizer.safetensors  AdamW moments, step counters, learning rate
//	    aci.json               the ACI controller (window, α, rule state)
//	    trainer_state.json     step, data cursor, RNG state
//	checkpoints/latest         the name of the newest complete checkpoint
//
// A checkpoint is written into a hidden temporary folder (each file synced),
// which is then renamed into place and the parent folder synced, and only
// then does "latest" move to it (temp + rename + fsync): a crash at any
// moment leaves the previous checkpoint intact and "latest" naming a
// complete one.
const (
	CheckpointsDir     = "checkpoints"
	LatestFile         = "latest"
	OptimizerFile      = "optimizer.safetensors"
	ACIStateFile       = "aci.json"
	TrainerStateFile   = "trainer_state.json"
	checkpointPrefix   = "step-"
	checkpointStepFmt  = "step-%06d"
	modelWeightsFile   = safetensors.SingleFileName
	hfConfigFile       = "config.json"
	tokenizerJSONFile  = "tokenizer.json"
	stateFormatVersion = 1
)

// hfAuxFiles are copied from the initial model folder into every checkpoint
// so that it is a complete Hugging Face folder (`cas generate --model` and
// transformers' from_pretrained load it).
var hfAuxFiles = []string{"generation_config.json", "tokenizer.json", "tokenizer_config.json",
	"special_tokens_map.json", "vocab.json", "merges.txt", "added_tokens.json"}

// TrainerState is the trainer's own part of a checkpoint.
type TrainerState struct {
	Version int `json:"version"`
	// Step is the number of completed training steps.
	Step int `json:"step"`
	// TotalSteps is the run's planned length.
	TotalSteps int `json:"total_steps"`
	// Data is the training-data cursor after Step steps.
	Data Cursor `json:"data"`
	// RNG is the trainer's PCG generator state (MarshalBinary).
	RNG []byte `json:"rng"`
	// WeightsDType is the dtype of model.safetensors ("F32" or "BF16").
	WeightsDType string `json:"weights_dtype"`
	// Time is when the checkpoint was written (RFC 3339).
	Time string `json:"time"`
}

// CheckpointSource names the files a checkpoint copies to be a complete
// Hugging Face folder.
type CheckpointSource struct {
	// ModelDir is the initial model's folder (config.json and the auxiliary
	// files are copied from it when present).
	ModelDir string
	// Tokenizer is a tokenizer.json outside ModelDir to copy (optional).
	Tokenizer string
}

// CheckpointName is the folder name of step's checkpoint.
func CheckpointName(step int) string { return fmt.Sprintf(checkpointStepFmt, step) }

// WriteCheckpoint writes step's checkpoint into runDir/checkpoints
// atomically, moves "latest" to it and deletes the oldest checkpoints
// beyond keep (0: keep all). It returns the checkpoint's folder.
func WriteCheckpoint(runDir string, policy *qwen.Model, aci *conformal.ACI, st TrainerState, src CheckpointSource, dtype safetensors.DType, keep int) (string, error) {
	root := filepath.Join(runDir, CheckpointsDir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	name := CheckpointName(st.Step)
	final := filepath.Join(root, name)
	d, err := atomicfile.CreateDir(final)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	tmp := d.Path()
	fail := func(err error) (string, error) {
		d.Abort()
		return "", fmt.Errorf("checkpoint step %d: %w", st.Step, err)
	}
	if err := writeHFFolder(tmp, policy, src, dtype); err != nil {
		return fail(err)
	}
	if err := SaveOptimizerState(policy.Context(), filepath.Join(tmp, OptimizerFile)); err != nil {
		return fail(err)
	}
	if aci != nil {
		b, err := json.Marshal(aci)
		if err != nil {
			return fail(err)
		}
		if err := writeFileAtomic(filepath.Join(tmp, ACIStateFile), b); err != nil {
			return fail(err)
		}
	}
	st.Version = stateFormatVersion
	st.WeightsDType = string(dtype)
	st.Time = time.Now().UTC().Format(time.RFC3339)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fail(err)
	}
	if err := writeFileAtomic(filepath.Join(tmp, TrainerStateFile), append(b, '\n')); err != nil {
		return fail(err)
	}
	// Commit replaces a checkpoint of this step that already exists (a run
	// resumed from an earlier one and reached this step again).
	if err := d.Commit(); err != nil {
		return "", fmt.Errorf("checkpoint step %d: %w", st.Step, err)
	}
	if err := writeFileAtomic(filepath.Join(root, LatestFile), []byte(name+"\n")); err != nil {
		return "", err
	}
	return final, pruneCheckpoints(root, keep, name)
}

// writeHFFolder writes the policy as a Hugging Face model folder: weights,
// config.json (the source's, else the policy's config) and the auxiliary
// files found in the source.
func writeHFFolder(dir string, policy *qwen.Model, src CheckpointSource, dtype safetensors.DType) error {
	if err := policy.Save(filepath.Join(dir, modelWeightsFile), dtype); err != nil {
		return err
	}
	cfgBytes, err := os.ReadFile(filepath.Join(src.ModelDir, hfConfigFile))
	if src.ModelDir == "" || err != nil {
		if cfgBytes, err = json.MarshalIndent(policy.Config, "", "  "); err != nil {
			return err
		}
	}
	if err := writeFileAtomic(filepath.Join(dir, hfConfigFile), cfgBytes); err != nil {
		return err
	}
	if src.ModelDir != "" {
		for _, f := range hfAuxFiles {
			if err := copyFileIfExists(filepath.Join(src.ModelDir, f), filepath.Join(dir, f)); err != nil {
				return err
			}
		}
	}
	if src.Tokenizer != "" {
		if _, err := os.Stat(filepath.Join(dir, tokenizerJSONFile)); errors.Is(err, os.ErrNotExist) {
			if err := copyFileIfExists(src.Tokenizer, filepath.Join(dir, tokenizerJSONFile)); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFileIfExists(from, to string) error {
	if _, err := os.Stat(from); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return atomicfile.Copy(from, to)
}

// pruneCheckpoints deletes leftover temporary folders of interrupted
// writes, checkpoints newer than current (written but never committed as
// "latest" before a crash: the resumed run writes them again), and the
// oldest complete checkpoints beyond keep (never current). The trainer runs
// it after every checkpoint and when it resumes, so keep holds after a
// crash too.
func pruneCheckpoints(root string, keep int, current string) error {
	tmps, _ := filepath.Glob(filepath.Join(root, atomicfile.TmpPattern(checkpointPrefix+"*")))
	for _, t := range tmps {
		os.RemoveAll(t)
	}
	steps, err := listCheckpoints(root)
	if err != nil {
		return err
	}
	if cur, err := strconv.Atoi(strings.TrimPrefix(current, checkpointPrefix)); err == nil {
		for len(steps) > 0 && steps[len(steps)-1] > cur {
			name := CheckpointName(steps[len(steps)-1])
			if err := os.RemoveAll(filepath.Join(root, name)); err != nil {
				return fmt.Errorf("checkpoint: remove uncommitted %s: %w", name, err)
			}
			steps = steps[:len(steps)-1]
		}
	}
	if keep <= 0 {
		return nil
	}
	for len(steps) > keep {
		name := CheckpointName(steps[0])
		steps = steps[1:]
		if name == current {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, name)); err != nil {
			return fmt.Errorf("checkpoint: prune %s: %w", name, err)
		}
	}
	return nil
}

// listCheckpoints returns the steps of the complete checkpoints, ascending.
func listCheckpoints(root string) ([]int, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	var steps []int
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), checkpointPrefix) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), checkpointPrefix))
		if err != nil || CheckpointName(n) != e.Name() {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, e.Name(), TrainerStateFile)); err == nil {
			steps = append(steps, n)
		}
	}
	slices.Sort(steps)
	return steps, nil
}

// LatestCheckpoint returns the folder named by runDir/checkpoints/latest.
func LatestCheckpoint(runDir string) (string, error) {
	root := filepath.Join(runDir, CheckpointsDir)
	b, err := os.ReadFile(filepath.Join(root, LatestFile))
	if err != nil {
		return "", fmt.Errorf("no checkpoint in %s: %w", runDir, err)
	}
	name := strings.TrimSpace(string(b))
	if !strings.HasPrefix(name, checkpointPrefix) || strings.ContainsAny(name, `/\`) {
		return "", fmt.Errorf("%s: bad checkpoint name %q", filepath.Join(root, LatestFile), name)
	}
	dir := filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(dir, TrainerStateFile)); err != nil {
		return "", fmt.Errorf("latest checkpoint %s is incomplete: %w", dir, err)
	}
	return dir, nil
}

// ReadTrainerState reads a checkpoint's trainer_state.json.
func ReadTrainerState(dir string) (TrainerState, error) {
	path := filepath.Join(dir, TrainerStateFile)
	st, err := loadfile.JSON[TrainerState](path)
	if err != nil {
		return TrainerState{}, err
	}
	if st.Version != stateFormatVersion || st.Step < 0 {
		return TrainerState{}, fmt.Errorf("load %s: unsupported state (version %d, step %d)", path, st.Version, st.Step)
	}
	const maxCursor = 1 << 40 // far beyond any dataset; keeps Pos+batch from overflowing
	if st.TotalSteps < 0 || st.Data.Epoch < 0 || st.Data.Pos < 0 || st.Data.Epoch > maxCursor || st.Data.Pos > maxCursor {
		return TrainerState{}, fmt.Errorf("load %s: bad state (total_steps %d, data cursor epoch %d pos %d)", path, st.TotalSteps, st.Data.Epoch, st.Data.Pos)
	}
	if err := new(rand.PCG).UnmarshalBinary(st.RNG); err != nil {
		return TrainerState{}, fmt.Errorf("load %s: rng state: %w", path, err)
	}
	return st, nil
}

// ReadACIState restores a checkpoint's ACI controller (nil, nil when the run
// had none).
func ReadACIState(dir string) (*conformal.ACI, error) {
	a, err := loadfile.JSON[conformal.ACI](filepath.Join(dir, ACIStateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// optimizerVariable says whether a policy-context variable is optimiser
// state: not a weight and not a gradient accumulator.
func optimizerVariable(v *context.Variable) bool {
	if v.Trainable {
		return false
	}
	s := v.Scope()
	return s != "/"+AccumScope && !strings.HasPrefix(s, "/"+AccumScope+"/")
}

// SaveOptimizerState writes every optimiser variable of ctx (AdamW moments
// and step counters: float32 and int64 tensors) under its scoped name, for
// RestoreOptimizerState.
func SaveOptimizerState(ctx *context.Context, path string) error {
	var ts []safetensors.Tensor
	for v := range ctx.IterVariables() {
		if !optimizerVariable(v) {
			continue
		}
		t, err := v.Value()
		if err != nil {
			return fmt.Errorf("optimizer variable %s: %w", v.ScopeAndName(), err)
		}
		dims := t.Shape().Dimensions
		switch v.DType() {
		case dtypes.Float32:
			ts = append(ts, safetensors.F32Tensor(v.ScopeAndName(), dims, tensors.MustCopyFlatData[float32](t)))
		case dtypes.Int64:
			ts = append(ts, safetensors.I64Tensor(v.ScopeAndName(), dims, tensors.MustCopyFlatData[int64](t)))
		default:
			return fmt.Errorf("optimizer variable %s has dtype %s (want float32 or int64)", v.ScopeAndName(), v.DType())
		}
	}
	return safetensors.Write(path, ts, map[string]string{"format": "cas-optimizer"})
}

// RestoreOptimizerState loads a checkpoint's optimizer.safetensors into the
// policy's context: each variable is created (or overwritten) at its scope
// before any training graph is built, so the optimiser continues exactly.
func RestoreOptimizerState(ctx *context.Context, dir string) error {
	path := filepath.Join(dir, OptimizerFile)
	f, err := safetensors.Open(path)
	if err != nil {
		return fmt.Errorf("load %s: %w", path, err)
	}
	defer f.Close()
	root := ctx.Checked(false)
	for _, name := range f.Names() {
		info, _ := f.Info(name)
		scope, vname := context.SplitScope(name)
		if scope == "" || vname == "" {
			return fmt.Errorf("load %s: tensor %q is not a scoped variable name", path, name)
		}
		var t *tensors.Tensor
		switch info.DType {
		case safetensors.F32:
			vals, dims, err := f.Float32(name)
			if err != nil {
				return fmt.Errorf("load %s: %w", path, err)
			}
			t = tensors.FromFlatDataAndDimensions(vals, dims...)
		case safetensors.I64:
			vals, dims, err := f.Int64(name)
			if err != nil {
				return fmt.Errorf("load %s: %w", path, err)
			}
			t = tensors.FromFlatDataAndDimensions(vals, dims...)
		default:
			return fmt.Errorf("load %s: tensor %s has dtype %s", path, name, info.DType)
		}
		if v := ctx.GetVariableByScopeAndName(scope, vname); v != nil {
			if !v.Shape().Equal(t.Shape()) {
				return fmt.Errorf("load %s: %s has shape %s, the context's variable %s", path, name, t.Shape(), v.Shape())
			}
			if err := v.SetValue(t); err != nil {
				return fmt.Errorf("load %s: %s: %w", path, name, err)
			}
			continue
		}
		root.InAbsPath(scope).VariableWithValue(vname, t).SetTrainable(false)
	}
	return nil
}

// ExportModel writes the policy as a Hugging Face folder into dir (created
// if missing): weights in dtype, config.json and the tokenizer files of src,
// each file written atomically. Load it with qwen.Load or `cas generate`.
func ExportModel(dir string, policy *qwen.Model, src CheckpointSource, dtype safetensors.DType) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("export %s: %w", dir, err)
	}
	if err := writeHFFolder(dir, policy, src, dtype); err != nil {
		return fmt.Errorf("export %s: %w", dir, err)
	}
	return syncDir(dir)
}
