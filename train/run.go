package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/schollz/progressbar/v3"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/safetensors"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
)

// Files of a run folder besides the checkpoints and metrics.
const (
	RunConfigFile    = "config.yaml"
	ACIBootstrapFile = "aci_bootstrap.jsonl"
)

// RunOptions are what a run needs from outside its config.
type RunOptions struct {
	// Backend runs the models (required).
	Backend backends.Backend
	// Retriever serves the searches (the index or server of the config,
	// opened by the caller). Required.
	Retriever search.Retriever
	// Tokenizer overrides the config's tokenizer file (tests use small
	// ones); nil loads model.tokenizer.
	Tokenizer agent.Tokenizer
	// Progress receives progress bars (nil: none); Log one-line messages
	// (nil: none).
	Progress io.Writer
	Log      io.Writer
	// PathRoot is the tree moved as a whole with the run folder (the
	// demo's output folder): config.yaml stores paths under it relative to
	// the run folder and others absolute (internal/relpath). "" means the
	// run folder itself.
	PathRoot string
	// StopAfter, when > 0, ends Run after that many steps of this process
	// (each followed by its checkpoint when due): a controlled stand-in for
	// a killed run.
	StopAfter int
}

// Trainer is a CAS training run (paper Algorithm 1): every step samples G
// trajectories for each of a batch of prompts with APS-truncated retrieval,
// rewards them, updates the policy with GRPO+ACI, logs a metrics line, and
// checkpoints every N steps.
type Trainer struct {
	cfg     *Config
	dir     string
	opts    RunOptions
	tok     agent.Tokenizer
	policy  *qwen.Model
	ref     *qwen.Model
	aci     *conformal.ACI
	learner *Learner
	runner  *agent.Runner
	loader  *Loader
	rng     *rand.PCG
	step    int
	total   int
	dtype   safetensors.DType
	metrics *MetricsWriter
	lastCkp int
	// droppedPrompts counts the training prompts over max_prompt_tokens.
	droppedPrompts int
	// beforeUpdate, when set (tests), sees each step's trajectories before
	// the update.
	beforeUpdate func(step int, trajs []*agent.Trajectory)
}

// NewTrainer starts a fresh run in runDir (created; it must not hold a run
// already): it saves the resolved config, loads the models, computes or
// reads the ACI bootstrap, and is ready to Run.
func NewTrainer(cfg *Config, runDir string, opts RunOptions) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(runDir, RunConfigFile)); err == nil {
		return nil, fmt.Errorf("%s already holds a run (resume it with --resume, or choose another --out)", runDir)
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, fmt.Errorf("run folder: %w", err)
	}
	c := *cfg
	if err := c.AbsPaths(); err != nil {
		return nil, err
	}
	if c.Name == "" {
		c.Name = filepath.Base(filepath.Clean(runDir))
	}
	return startTrainer(&c, runDir, opts)
}

// startTrainer initialises step 0 of a run whose folder exists.
func startTrainer(c *Config, runDir string, opts RunOptions) (*Trainer, error) {
	t, err := newTrainer(c, runDir, opts)
	if err != nil {
		return nil, err
	}
	policy, err := qwen.Load(c.Model.Path, opts.Backend, policyLoadOptions(c.precision(), opts.Progress))
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	t.policy = policy
	if err := t.loadReference(); err != nil {
		return nil, err
	}
	if err := t.initACI(); err != nil {
		return nil, err
	}
	t.rng = rand.NewPCG(c.Seed, 0xa54ff53a5f1d36f1)
	if err := t.finish(); err != nil {
		return nil, err
	}
	if t.metrics, err = OpenMetrics(runDir, 0); err != nil {
		return nil, err
	}
	if err := c.Save(filepath.Join(runDir, RunConfigFile), opts.PathRoot); err != nil {
		return nil, err
	}
	t.logf("run %s: %d prompts (%d dropped: over rollout.max_prompt_tokens %d), %d steps of %d prompts × %d, policy %s (%.1fM parameters)",
		c.Name, t.loader.Len(), t.droppedPrompts, c.Rollout.MaxPromptTokens, t.total, c.GRPO.PromptsPerStep, c.Rollout.GroupSize, c.Model.Path,
		float64(policy.Config.NumParameters())/1e6)
	return t, nil
}

// ResumeTrainer continues the run in runDir from its latest checkpoint
// with the saved config (optionally changed by overrides, e.g. a longer
// steps): the policy, optimiser, ACI controller, RNG and data cursor are
// restored, and metrics lines after the checkpoint are dropped, so the run
// continues exactly as an uninterrupted one would have.
func ResumeTrainer(runDir string, sets []string, opts RunOptions) (*Trainer, error) {
	cfgPath := filepath.Join(runDir, RunConfigFile)
	cfg, err := LoadConfig(cfgPath, sets)
	if err != nil {
		return nil, err
	}
	ckpt, err := LatestCheckpoint(runDir)
	if errors.Is(err, os.ErrNotExist) {
		// Stopped before its first checkpoint: start over with the saved
		// config (and its saved ACI bootstrap).
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, "%s has no checkpoint yet: starting the run over\n", runDir)
		}
		if _, serr := os.Stat(filepath.Join(runDir, ACIBootstrapFile)); serr == nil && cfg.ACI.Bootstrap == "" {
			cfg.ACI.Bootstrap = filepath.Join(runDir, ACIBootstrapFile)
		}
		return startTrainer(cfg, runDir, opts)
	}
	if err != nil {
		return nil, err
	}
	st, err := ReadTrainerState(ckpt)
	if err != nil {
		return nil, err
	}
	// A crash between a checkpoint and its pruning leaves one too many.
	if err := pruneCheckpoints(filepath.Dir(ckpt), cfg.Checkpoint.Keep, filepath.Base(ckpt)); err != nil {
		return nil, err
	}
	t, err := newTrainer(cfg, runDir, opts)
	if err != nil {
		return nil, err
	}
	if t.policy, err = qwen.Load(ckpt, opts.Backend, policyLoadOptions(cfg.precision(), opts.Progress)); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if err := RestoreOptimizerState(t.policy.Context(), ckpt); err != nil {
		return nil, err
	}
	if err := t.loadReference(); err != nil {
		return nil, err
	}
	if t.aci, err = ReadACIState(ckpt); err != nil {
		return nil, err
	}
	t.rng = &rand.PCG{}
	if err := t.rng.UnmarshalBinary(st.RNG); err != nil {
		return nil, fmt.Errorf("%s: rng state: %w", ckpt, err)
	}
	t.step, t.lastCkp = st.Step, st.Step
	t.loader.SetCursor(st.Data)
	if st.WeightsDType != string(safetensors.F32) {
		t.logf("warning: checkpoint weights are %s: the resumed run is not bit-identical to an uninterrupted one", st.WeightsDType)
	}
	if err := t.finish(); err != nil {
		return nil, err
	}
	if t.metrics, err = OpenMetrics(runDir, st.Step); err != nil {
		return nil, err
	}
	if len(sets) > 0 {
		if err := cfg.Save(cfgPath, opts.PathRoot); err != nil {
			return nil, err
		}
	}
	t.logf("resumed %s at step %d of %d from %s (%d prompts, %d dropped: over rollout.max_prompt_tokens)", cfg.Name, t.step, t.total, ckpt, t.loader.Len(), t.droppedPrompts)
	return t, nil
}

// newTrainer loads what fresh and resumed runs share: tokenizer and data.
func newTrainer(cfg *Config, runDir string, opts RunOptions) (*Trainer, error) {
	if opts.Backend == nil {
		return nil, errors.New("train: no backend")
	}
	if opts.Retriever == nil {
		return nil, errors.New("train: no retriever")
	}
	t := &Trainer{cfg: cfg, dir: runDir, opts: opts, tok: opts.Tokenizer}
	var err error
	if t.tok == nil {
		path := cfg.Model.Tokenizer
		if path == "" {
			path = filepath.Join(cfg.Model.Path, tokenizerJSONFile)
		}
		tk, err := tokenizer.Load(path)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", path, err)
		}
		t.tok = tk
	}
	dt, err := cfg.weightDType()
	if err != nil {
		return nil, err
	}
	t.dtype = safetensors.DType(dt)
	prompts, err := qa.Load(cfg.Data.Train...)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("data.train: %w (moved? give its new path with --set data.train=PATH, absolute or relative to the folder of config.yaml)", err)
		}
		return nil, fmt.Errorf("data.train: %w", err)
	}
	if cfg.Data.Limit > 0 && cfg.Data.Limit < len(prompts) {
		prompts = prompts[:cfg.Data.Limit]
	}
	if prompts, t.droppedPrompts, err = filterLongPrompts(cfg, t.tok, prompts); err != nil {
		return nil, err
	}
	if len(prompts) < cfg.GRPO.PromptsPerStep {
		return nil, fmt.Errorf("data.train has %d prompts, fewer than prompts_per_step %d", len(prompts), cfg.GRPO.PromptsPerStep)
	}
	t.loader = NewLoader(prompts, cfg.Seed, cfg.Data.Shuffle)
	t.total = cfg.TotalSteps(len(prompts))
	if t.total < 1 {
		return nil, fmt.Errorf("the run has no step (steps %d, epochs %d, %d prompts, %d per step)",
			cfg.Steps, cfg.Epochs, len(prompts), cfg.GRPO.PromptsPerStep)
	}
	return t, nil
}

// filterLongPrompts drops the prompts whose rendered agent prompt exceeds
// rollout.max_prompt_tokens (the paper's data filter), in order, and counts
// them; a resumed run filters the same file the same way.
func filterLongPrompts(cfg *Config, tok agent.Tokenizer, prompts []qa.Record) ([]qa.Record, int, error) {
	rc := cfg.RolloutConfig()
	qs := make([]string, len(prompts))
	for i, p := range prompts {
		qs[i] = p.Question
	}
	kept, dropped, err := agent.FilterLongPrompts(tok, rc, qs)
	if err != nil {
		return nil, 0, fmt.Errorf("data.train: %w", err)
	}
	out := make([]qa.Record, len(kept))
	for i, k := range kept {
		out[i] = prompts[k]
	}
	return out, dropped, nil
}

// DroppedPrompts is the number of training prompts dropped for being longer
// than rollout.max_prompt_tokens.
func (t *Trainer) DroppedPrompts() int { return t.droppedPrompts }

func (t *Trainer) loadReference() error {
	path := t.cfg.Model.Reference
	if path == "" {
		path = t.cfg.Model.Path
	}
	if t.cfg.GRPO.KLCoef == 0 {
		return nil
	}
	ref, err := qwen.Load(path, t.opts.Backend, referenceLoadOptions(t.cfg.precision(), t.opts.Progress))
	if err != nil {
		return fmt.Errorf("reference model: %w", err)
	}
	t.ref = ref
	return nil
}

// initACI builds the controller of a fresh run, its window preloaded with
// the bootstrap scores (read from aci.bootstrap, or computed with the
// untrained policy and saved to the run folder).
func (t *Trainer) initACI() error {
	var scores []float64
	var err error
	if t.cfg.ACI.Bootstrap != "" {
		if scores, err = ReadScores(t.cfg.ACI.Bootstrap); err != nil {
			return err
		}
	} else {
		if scores, err = ComputeBootstrap(t.cfg, t.policy, t.tok, t.opts.Progress); err != nil {
			return err
		}
	}
	if err := WriteScores(filepath.Join(t.dir, ACIBootstrapFile), scores); err != nil {
		return err
	}
	if t.aci, err = conformal.NewACI(t.cfg.ACI.ACIConfig, scores); err != nil {
		return err
	}
	t.logf("ACI window bootstrapped with %d scores (next q = %.4g)", len(scores), t.aci.QHat())
	return nil
}

// ComputeBootstrap draws aci.calib_prompts prompts (seeded) from
// aci.calib_data (default data.train) and scores the policy's greedy
// answers to them (BootstrapScores).
func ComputeBootstrap(cfg *Config, policy *qwen.Model, tok agent.Tokenizer, progress io.Writer) ([]float64, error) {
	files := cfg.ACI.CalibData
	if len(files) == 0 {
		files = cfg.Data.Train
	}
	prompts, err := qa.Load(files...)
	if err != nil {
		return nil, fmt.Errorf("aci calibration prompts: %w", err)
	}
	rc := cfg.RolloutConfig()
	calib := DrawPrompts(prompts, cfg.ACI.CalibPrompts, cfg.Seed)
	return BootstrapScores(policy, tok, calib, BootstrapConfig{
		Placement: rc.Placement, ChatFamily: rc.ChatFamily, MaxNewTokens: rc.MaxTurnTokens,
		Batch: max(1, min(64, cfg.GRPO.MicroBatch*4)), Progress: progress,
	})
}

// finish builds the learner and the rollout runner.
func (t *Trainer) finish() error {
	lc := t.cfg.learnerConfig(t.total)
	var err error
	if t.learner, err = NewLearner(t.policy, t.ref, t.aci, lc); err != nil {
		return err
	}
	rc := t.cfg.RolloutConfig()
	if t.cfg.APS.Enabled {
		cal, err := loadAPSChecked(t.cfg.APS.QHatFile, t.cfg.APS.Alpha, t.cfg.APS.Candidates)
		if err != nil {
			return err
		}
		rc.SetCalibration(cal)
	}
	if t.runner, err = agent.NewRunner(agent.QwenPolicy{Model: t.policy}, t.tok, t.opts.Retriever, rc); err != nil {
		return err
	}
	return nil
}

// loadAPSChecked reads an APS calibration file and checks it against the
// config: the level it was calibrated at (when alpha > 0 and the file
// records one) and the number of candidates per search it is meant for
// (when the file records one).
func loadAPSChecked(path string, alpha float64, candidates int) (conformal.Calibration, error) {
	c, err := conformal.LoadCalibration(path)
	if err != nil {
		return c, err
	}
	if alpha > 0 && c.Alpha > 0 && math.Abs(c.Alpha-alpha) > 1e-9 {
		return c, fmt.Errorf("%s was calibrated at alpha %g, the config says aps.alpha %g", path, c.Alpha, alpha)
	}
	if c.Candidates > 0 && c.Candidates != candidates {
		return c, fmt.Errorf("%s was calibrated for %d candidates per search, the config says aps.candidates %d (recalibrate with --topk %d, or record the official code's 20/5 with --candidates %d)",
			path, c.Candidates, candidates, candidates, candidates)
	}
	return c, nil
}

// Step returns the number of completed steps.
func (t *Trainer) Step() int { return t.step }

// Total returns the run's length in steps.
func (t *Trainer) Total() int { return t.total }

// Policy returns the model being trained.
func (t *Trainer) Policy() *qwen.Model { return t.policy }

// Config returns the run's resolved configuration.
func (t *Trainer) Config() *Config { return t.cfg }

// Dir returns the run folder.
func (t *Trainer) Dir() string { return t.dir }

func (t *Trainer) logf(format string, args ...any) {
	if t.opts.Log != nil {
		fmt.Fprintf(t.opts.Log, format+"\n", args...)
	}
}

// Run trains until the last step (or StopAfter steps, or ctx is
// cancelled: the state after the last completed step is then checkpointed,
// so the run can be resumed). A NaN/Inf loss or gradient stops the run
// with an error naming the step; the last good checkpoint is kept.
func (t *Trainer) Run(ctx context.Context) error {
	defer t.metrics.Close()
	var bar *progressbar.ProgressBar
	if t.opts.Progress != nil {
		bar = progressbar.NewOptions(t.total, progressbar.OptionSetWriter(t.opts.Progress),
			progressbar.OptionSetDescription("train"), progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true), progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionFullWidth())
		_ = bar.Set(t.step)
	}
	done := 0
	for t.step < t.total {
		if err := ctx.Err(); err != nil {
			return errors.Join(err, t.checkpointIfNew())
		}
		m, err := t.trainStep(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return errors.Join(err, t.checkpointIfNew())
			}
			last := "none (no step completed)"
			if t.lastCkp > 0 {
				last = filepath.Join(t.dir, CheckpointsDir, CheckpointName(t.lastCkp))
			}
			return fmt.Errorf("step %d: %w (the run stopped; last good checkpoint: %s)", t.step+1, err, last)
		}
		t.step++
		if err := t.metrics.Write(m); err != nil {
			return err
		}
		if bar != nil {
			bar.Describe(fmt.Sprintf("train (reward %.3f, EM %.3f, searches %.2f, α %.3f)", m.Reward, m.EM, m.SearchCalls, m.Alpha))
			_ = bar.Set(t.step)
		}
		if t.step%t.cfg.Checkpoint.Every == 0 || t.step == t.total {
			if err := t.checkpoint(); err != nil {
				return err
			}
		}
		done++
		if t.opts.StopAfter > 0 && done >= t.opts.StopAfter {
			return nil
		}
	}
	return nil
}

// trainStep runs one step: prompts → rollouts → GRPO+ACI update → metrics.
func (t *Trainer) trainStep(ctx context.Context) (StepMetrics, error) {
	start := time.Now()
	prompts, err := t.loader.Next(t.cfg.GRPO.PromptsPerStep)
	if err != nil {
		return StepMetrics{}, err
	}
	epoch := t.loader.Cursor().Epoch
	qs := prompts
	seed := t.rng.Uint64()
	chunk := t.cfg.Rollout.BatchPrompts
	if chunk <= 0 {
		chunk = len(qs)
	}
	trajs := make([]*agent.Trajectory, 0, len(qs)*t.cfg.Rollout.GroupSize)
	for off := 0; off < len(qs); off += chunk {
		// Each chunk samples with its own seed, derived from the step's.
		ats, err := t.runner.Run(ctx, qs[off:min(off+chunk, len(qs))], t.cfg.Rollout.GroupSize, seed+uint64(off)*0x9e3779b97f4a7c15)
		if err != nil {
			return StepMetrics{}, fmt.Errorf("rollouts of prompts %d–%d: %w", off+1, min(off+chunk, len(qs)), err)
		}
		for _, a := range ats {
			a.Question += off // the GRPO group: the question's index in the step
			trajs = append(trajs, a)
		}
	}
	rollout := time.Since(start)
	if t.beforeUpdate != nil {
		t.beforeUpdate(t.step+1, trajs)
	}
	var res *StepResult
	if !t.cfg.GRPO.Frozen {
		if res, err = t.learner.Step(trajs); err != nil {
			return StepMetrics{}, err
		}
	}
	m := NewStepMetrics(t.step+1, trajs, res, rollout, time.Since(start))
	m.Epoch, m.Run, m.ACIWeighted = epoch, t.cfg.Name, t.cfg.ACI.Enabled && !t.cfg.GRPO.Frozen
	return m, nil
}

func (t *Trainer) checkpointIfNew() error {
	if t.step == t.lastCkp {
		return nil
	}
	return t.checkpoint()
}

// checkpoint writes the state after t.step steps.
func (t *Trainer) checkpoint() error {
	if err := t.metrics.Sync(); err != nil {
		return err
	}
	rng, err := t.rng.MarshalBinary()
	if err != nil {
		return err
	}
	st := TrainerState{Step: t.step, TotalSteps: t.total, Data: t.loader.Cursor(), RNG: rng}
	src := CheckpointSource{ModelDir: t.cfg.Model.Path, Tokenizer: t.cfg.Model.Tokenizer}
	dir, err := WriteCheckpoint(t.dir, t.policy, t.aci, st, src, t.dtype, t.cfg.Checkpoint.Keep)
	if err != nil {
		return err
	}
	t.lastCkp = t.step
	t.logf("checkpoint %s", dir)
	return nil
}
