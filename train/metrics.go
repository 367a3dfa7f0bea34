package train

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/internal/jsonl"
)

// MetricsFile is the per-step metrics log of a run: one JSON object per line.
const MetricsFile = "metrics.jsonl"

// StepMetrics is one line of metrics.jsonl. Trajectory statistics are means
// over all G trajectories of all prompts of the step; loss statistics come
// from the learner (StepResult).
type StepMetrics struct {
	Step  int    `json:"step"`
	Epoch int    `json:"epoch"`
	Run   string `json:"run,omitempty"`

	// Rollout statistics.
	Reward      float64 `json:"reward"`       // mean reward (Eq. 5)
	RewardStd   float64 `json:"reward_std"`   // population std of the rewards
	EM          float64 `json:"em"`           // exact-match rate
	FormatValid float64 `json:"format_valid"` // format-valid rate
	SearchCalls float64 `json:"search_calls"` // searches per trajectory
	// Searched is the share of trajectories with at least one search;
	// EMSearched and EMDirect the exact-match rates of those with and
	// without one (0 where there are none): whether searching pays on the
	// training prompts, which is what GRPO's advantages compare.
	Searched      float64 `json:"searched"`
	EMSearched    float64 `json:"em_searched"`
	EMDirect      float64 `json:"em_direct"`
	Redundant     float64 `json:"redundant_searches"` // redundant searches per trajectory (agent.RedundantSearches)
	DocsPerSearch float64 `json:"docs_per_search"`    // passages kept per search (APS or top-k)
	Turns         float64 `json:"turns"`              // generations per trajectory
	ResponseLen   float64 `json:"response_length"`    // response tokens per trajectory (generated + retrieved)
	PolicyTokens  float64 `json:"policy_tokens"`      // generated tokens per trajectory (in the loss)
	Trajectories  int     `json:"trajectories"`

	// ACI (paper §3.3): α_t, q_t, the fraction of low-confidence
	// trajectories (ω = η; err_t) and the mean answer-span NLL.
	Alpha         float64             `json:"aci_alpha"`
	AlphaNext     float64             `json:"aci_alpha_next"`
	QHat          conformal.JSONFloat `json:"aci_qhat"`
	LowConfidence float64             `json:"low_conf_ratio"`
	ScoreMean     float64             `json:"answer_nll"`
	// Scores are the step's ACI scores s_i (answer-span NLL, Eq. 6), in
	// trajectory order: what the err_t of any other threshold (a fixed
	// bootstrap quantile, say) can be recomputed from.
	Scores      []float64 `json:"aci_scores,omitempty"`
	ACIWeighted bool      `json:"aci_weighted"`

	// Update statistics.
	Loss          float64 `json:"loss"`
	PGLoss        float64 `json:"pg_loss"`
	KL            float64 `json:"kl"`
	Entropy       float64 `json:"entropy"`
	ClipFrac      float64 `json:"clip_frac"`
	ClipFracLower float64 `json:"clip_frac_lower"`
	ApproxKL      float64 `json:"approx_kl"`
	GradNorm      float64 `json:"grad_norm"`
	LR            float64 `json:"lr"`
	AdvAbsMean    float64 `json:"adv_abs_mean"`

	// Timing (not reproducible across runs; ignored by resume checks).
	TokensPerSec float64 `json:"tokens_per_s"` // response tokens sampled per second of rollout
	StepTime     float64 `json:"step_time_s"`
	RolloutTime  float64 `json:"rollout_time_s"`
	ScoreTime    float64 `json:"score_time_s"`
	UpdateTime   float64 `json:"update_time_s"`
}

// WithoutTiming returns a copy with the wall-clock fields zeroed (for comparing
// runs, with reflect.DeepEqual: Scores is a slice).
func (m StepMetrics) WithoutTiming() StepMetrics {
	m.TokensPerSec, m.StepTime, m.RolloutTime, m.ScoreTime, m.UpdateTime = 0, 0, 0, 0, 0
	return m
}

// NewStepMetrics summarises a step's trajectories and update.
func NewStepMetrics(step int, trajs []*agent.Trajectory, res *StepResult, rollout, total time.Duration) StepMetrics {
	m := StepMetrics{Step: step, Trajectories: len(trajs)}
	n := float64(len(trajs))
	searches, docs := 0, 0
	respTokens := 0
	for _, t := range trajs {
		m.Reward += t.Outcome.Reward
		if t.EM {
			m.EM++
		}
		if t.Outcome.Valid {
			m.FormatValid++
		}
		searches += len(t.Searches)
		if len(t.Searches) > 0 {
			m.Searched++
			if t.EM {
				m.EMSearched++
			}
		} else if t.EM {
			m.EMDirect++
		}
		m.Redundant += float64(agent.RedundantSearches(t.Searches))
		for _, c := range t.Searches {
			docs += len(c.Kept)
		}
		m.Turns += float64(t.Turns)
		respTokens += t.ResponseLen()
		m.PolicyTokens += float64(t.PolicyTokens())
	}
	if n > 0 {
		mean := m.Reward / n
		for i := range trajs {
			d := trajs[i].Outcome.Reward - mean
			m.RewardStd += d * d
		}
		m.RewardStd = math.Sqrt(m.RewardStd / n)
		m.Reward = mean
		m.EM /= n
		m.FormatValid /= n
		if m.Searched > 0 {
			m.EMSearched /= m.Searched
		}
		if direct := n - m.Searched; direct > 0 {
			m.EMDirect /= direct
		}
		m.Searched /= n
		m.SearchCalls = float64(searches) / n
		m.Redundant /= n
		m.Turns /= n
		m.ResponseLen = float64(respTokens) / n
		m.PolicyTokens /= n
	}
	if searches > 0 {
		m.DocsPerSearch = float64(docs) / float64(searches)
	}
	if res != nil {
		m.Loss, m.PGLoss, m.KL, m.Entropy = res.Loss, res.PG, res.KL, res.Entropy
		m.ClipFrac, m.ClipFracLower, m.ApproxKL = res.ClipFrac, res.ClipFracLower, res.ApproxKL
		m.GradNorm, m.LR = res.GradNorm, res.LR
		for _, a := range res.Advantages {
			m.AdvAbsMean += math.Abs(a)
		}
		for _, s := range res.Scores {
			m.ScoreMean += s
		}
		m.Scores = append([]float64(nil), res.Scores...)
		if len(res.Advantages) > 0 {
			m.AdvAbsMean /= float64(len(res.Advantages))
			m.ScoreMean /= float64(len(res.Scores))
		}
		if res.HasACI {
			m.Alpha, m.AlphaNext, m.QHat = res.ACI.Alpha, res.ACI.AlphaNext, conformal.JSONFloat(res.ACI.QHat)
			m.LowConfidence = res.LowConfidence
		}
		m.ScoreTime, m.UpdateTime = res.ScoreTime.Seconds(), res.UpdateTime.Seconds()
	}
	m.RolloutTime, m.StepTime = rollout.Seconds(), total.Seconds()
	if rollout > 0 {
		m.TokensPerSec = float64(respTokens) / rollout.Seconds()
	}
	return m
}

// MetricsWriter appends StepMetrics lines to a file.
type MetricsWriter struct {
	f *os.File
}

// OpenMetrics opens runDir/metrics.jsonl for appending, first dropping the
// lines of steps after keepThrough (those a resumed run will redo) by an
// atomic rewrite. keepThrough < 0 keeps everything.
func OpenMetrics(runDir string, keepThrough int) (*MetricsWriter, error) {
	path := filepath.Join(runDir, MetricsFile)
	if keepThrough >= 0 {
		if err := truncateMetrics(path, keepThrough); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &MetricsWriter{f: f}, nil
}

// Write appends one line; every value must be finite (±Inf q_t is written
// as a string by JSONFloat).
func (w *MetricsWriter) Write(m StepMetrics) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("metrics step %d: %w", m.Step, err)
	}
	if _, err := w.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// Sync flushes the file to disk.
func (w *MetricsWriter) Sync() error { return w.f.Sync() }

// Close closes the file.
func (w *MetricsWriter) Close() error { return w.f.Close() }

func truncateMetrics(path string, keepThrough int) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	var kept bytes.Buffer
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) == 0 {
			continue
		}
		var s struct {
			Step int `json:"step"`
		}
		if json.Unmarshal(t, &s) != nil {
			continue // a torn last line of a crash
		}
		if s.Step <= keepThrough {
			kept.Write(t)
			kept.WriteByte('\n')
		}
	}
	if bytes.Equal(kept.Bytes(), b) {
		return nil
	}
	return writeFileAtomic(path, kept.Bytes())
}

// ReadMetrics reads a metrics.jsonl file (torn or blank lines skipped).
func ReadMetrics(path string) ([]StepMetrics, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	defer f.Close()
	return readMetrics(f, path)
}

func readMetrics(r io.Reader, name string) ([]StepMetrics, error) {
	var out []StepMetrics
	err := jsonl.Lines(r, name, func(_ int, b []byte, last bool) error {
		var m StepMetrics
		if err := json.Unmarshal(b, &m); err != nil {
			if last {
				return jsonl.ErrStop // a torn last line
			}
			return err
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
