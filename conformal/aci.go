package conformal

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/cas-engine/cas/internal/textenum"
)

// ACIRule selects how the ACI controller updates α_t after each step.
type ACIRule int

const (
	// RulePlain is Gibbs & Candès (2021) Eq. 2 (CAS paper Eq. 4):
	//
	//	α_{t+1} = α_t + γ(ρ − err_t).
	//
	// With q_t = +∞ for α_t ≤ 0 and −∞ for α_t ≥ 1 (RuleConformal does this
	// on its own), it satisfies, for any score sequence,
	//
	//	|(1/T) Σ_t err_t − ρ| ≤ (max(α₁, 1−α₁) + γ) / (Tγ).
	RulePlain ACIRule = iota
	// RuleSmoothed is the CAS paper's Eq. 7 (Gibbs & Candès Eq. 3 weights):
	//
	//	α_{t+1} = α_t + γ(ρ − Σ_{s≤t} v_s err_s),   v_s = λ^{t−s} / Σ_{s'≤t} λ^{t−s'},
	//
	// with λ = Decay (0.95). This is the default.
	RuleSmoothed
	// RuleEMA is the official CAS code's update:
	//
	//	ema_t = λ·ema_{t−1} + (1−λ)·err_t  (ema₀ = 0),
	//	α_{t+1} = clip(α_t + γ(ρ − ema_t), AlphaMin, AlphaMax)
	//
	// with λ = 0.95 and clip range [0.01, 0.99]; the code pairs it with the
	// linear-interpolation quantile (torch.quantile).
	RuleEMA
)

var aciRuleNames = textenum.Names[ACIRule]{Type: "ACIRule", Kind: "ACI rule", Names: []string{"plain", "smoothed", "ema"}}

// String returns "plain", "smoothed" or "ema".
func (r ACIRule) String() string { return aciRuleNames.String(r) }

// ParseACIRule maps "plain", "smoothed" or "ema" (case-insensitive) to a rule.
func ParseACIRule(name string) (ACIRule, error) { return aciRuleNames.Parse(name) }

// MarshalText encodes the rule by name.
func (r ACIRule) MarshalText() ([]byte, error) { return aciRuleNames.Marshal(r) }

// UnmarshalText decodes a rule name.
func (r *ACIRule) UnmarshalText(b []byte) error { return aciRuleNames.Unmarshal(b, r) }

// ACIWindow says what the ACI window of size Window counts.
type ACIWindow int

const (
	// WindowScores keeps the last Window scores (the official code's deque:
	// one step of more than Window trajectories replaces it whole). It is
	// the zero value, so states saved before the choice existed resume as
	// they ran.
	WindowScores ACIWindow = iota
	// WindowIterations keeps every score of the last Window iterations: at
	// step t, the scores of iterations max(1, t−Window) … t−1 (paper §3.3).
	// The bootstrap scores count as iteration 0 and stay until Window steps
	// have been taken. This is the default.
	WindowIterations
)

var aciWindowNames = textenum.Names[ACIWindow]{Type: "ACIWindow", Kind: "ACI window",
	Names: []string{"scores", "iterations"}, Want: "iterations or scores"}

// String returns "scores" or "iterations".
func (w ACIWindow) String() string { return aciWindowNames.String(w) }

// ParseACIWindow maps "iterations" (paper) or "scores" (code) to a window.
func ParseACIWindow(name string) (ACIWindow, error) { return aciWindowNames.Parse(name) }

// MarshalText encodes the window by name.
func (w ACIWindow) MarshalText() ([]byte, error) { return aciWindowNames.Marshal(w) }

// UnmarshalText decodes a window name.
func (w *ACIWindow) UnmarshalText(b []byte) error { return aciWindowNames.Unmarshal(b, w) }

// ACI defaults (METHOD.md, "ACI on training").
const (
	DefaultRho    = 0.25
	DefaultGamma  = 0.005
	DefaultEta    = 0.5
	DefaultWindow = 2000
	DefaultDecay  = 0.95
	// CodeAlphaMin and CodeAlphaMax are the official code's clip on α.
	CodeAlphaMin, CodeAlphaMax = 0.01, 0.99
)

// ACIConfig configures an ACI controller.
type ACIConfig struct {
	// Rho is the target error rate ρ ∈ (0, 1).
	Rho float64 `json:"rho" yaml:"rho"`
	// Gamma is the step size γ > 0.
	Gamma float64 `json:"gamma" yaml:"gamma"`
	// Eta is the weight η ∈ [0, 1] of trajectories scoring above q_t.
	Eta float64 `json:"eta" yaml:"eta"`
	// Window is the window's size (≥ 1), in iterations or in scores as
	// WindowUnit says.
	Window int `json:"window" yaml:"window"`
	// WindowUnit: WindowIterations (paper) or WindowScores (code).
	WindowUnit ACIWindow `json:"window_unit" yaml:"window_unit"`
	// Rule is the α update rule.
	Rule ACIRule `json:"rule" yaml:"rule"`
	// Quantile is the rule for q_t = Quantile(window, 1−α_t).
	Quantile QuantileRule `json:"quantile" yaml:"quantile"`
	// Decay is λ ∈ [0, 1) of RuleSmoothed and RuleEMA.
	Decay float64 `json:"decay" yaml:"decay"`
	// Alpha1 is the initial α₁ ∈ (0, 1); 0 means ρ.
	Alpha1 float64 `json:"alpha1" yaml:"alpha1"`
	// AlphaMin and AlphaMax clip α under RuleEMA (0 ≤ min < max ≤ 1).
	AlphaMin float64 `json:"alpha_min" yaml:"alpha_min"`
	AlphaMax float64 `json:"alpha_max" yaml:"alpha_max"`
}

// DefaultACIConfig is the paper's setting: ρ = 0.25, γ = 0.005, η = 0.5, a
// window of the last 2000 iterations, the smoothed rule (Eq. 7, λ = 0.95),
// α₁ = ρ, and the finite-sample conformal quantile.
func DefaultACIConfig() ACIConfig {
	return ACIConfig{
		Rho: DefaultRho, Gamma: DefaultGamma, Eta: DefaultEta, Window: DefaultWindow, WindowUnit: WindowIterations,
		Rule: RuleSmoothed, Quantile: RuleConformal, Decay: DefaultDecay,
		Alpha1: DefaultRho, AlphaMin: CodeAlphaMin, AlphaMax: CodeAlphaMax,
	}
}

// CodeACIConfig is the official code's setting: DefaultACIConfig with the EMA
// rule, α clipped to [0.01, 0.99], the linear-interpolation quantile and a
// window of the last 2000 scores.
func CodeACIConfig() ACIConfig {
	c := DefaultACIConfig()
	c.Rule = RuleEMA
	c.Quantile = RuleLinear
	c.WindowUnit = WindowScores
	return c
}

// Validate reports an unusable configuration.
func (c ACIConfig) Validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !(c.Rho > 0 && c.Rho < 1):
		return fmt.Errorf("aci: rho %v outside (0, 1)", c.Rho)
	case !(c.Gamma > 0) || !finite(c.Gamma):
		return fmt.Errorf("aci: gamma %v must be positive and finite", c.Gamma)
	case !(c.Eta >= 0 && c.Eta <= 1):
		return fmt.Errorf("aci: eta %v outside [0, 1]", c.Eta)
	case c.Window < 1:
		return fmt.Errorf("aci: window %d must be ≥ 1", c.Window)
	case c.WindowUnit < WindowScores || c.WindowUnit > WindowIterations:
		return fmt.Errorf("aci: invalid window unit %d", int(c.WindowUnit))
	case c.Rule < RulePlain || c.Rule > RuleEMA:
		return fmt.Errorf("aci: invalid rule %d", int(c.Rule))
	case c.Quantile < RuleConformal || c.Quantile > RuleLinear:
		return fmt.Errorf("aci: invalid quantile rule %d", int(c.Quantile))
	case !(c.Decay >= 0 && c.Decay < 1):
		return fmt.Errorf("aci: decay %v outside [0, 1)", c.Decay)
	case c.Alpha1 != 0 && !(c.Alpha1 > 0 && c.Alpha1 < 1):
		return fmt.Errorf("aci: alpha1 %v outside (0, 1)", c.Alpha1)
	case c.Rule == RuleEMA && !(c.AlphaMin >= 0 && c.AlphaMin < c.AlphaMax && c.AlphaMax <= 1):
		return fmt.Errorf("aci: alpha clip [%v, %v] must satisfy 0 ≤ min < max ≤ 1", c.AlphaMin, c.AlphaMax)
	}
	return nil
}

// ACI is the adaptive conformal inference controller of CAS training
// (Gibbs & Candès 2021; CAS paper Eqs. 4, 6, 7). At step t, given the scores
// s_1…s_B of all trajectories in the batch (answer-span NLL, AnswerNLL):
//
//	q_t   = Quantile(window, 1 − α_t)           (before anything is updated;
//	                                              +∞ for α_t ≤ 0, −∞ for α_t ≥ 1)
//	err_t = (1/B) Σ_i 1[s_i > q_t]
//	ω_i   = 1 if s_i ≤ q_t else η
//	α_{t+1} from the Rule; then the batch is appended to the window, which
//	keeps the scores of the last Window iterations (paper) or the last
//	Window scores (code), see ACIWindow (an empty window gives q_t = +∞).
//
// An ACI is not safe for concurrent use. Its state round-trips exactly
// through MarshalJSON/UnmarshalJSON.
type ACI struct {
	cfg     ACIConfig
	t       int         // steps taken
	alpha   float64     // α_{t+1}, the α of the next step
	ema     float64     // RuleEMA state
	sNum    float64     // RuleSmoothed: Σ_s λ^{t−s} err_s
	sDen    float64     // RuleSmoothed: Σ_s λ^{t−s}
	window  []float64   // WindowScores: ring buffer, len ≤ cfg.Window
	head    int         // index of the oldest score once the ring is full
	batches [][]float64 // WindowIterations: one batch per iteration, oldest first, ≤ cfg.Window
	scratch []float64   // scratch for the quantile
}

// ACIStep is what one ACI step reports.
type ACIStep struct {
	// T is the 1-based step index t.
	T int `json:"t"`
	// Alpha is α_t, the level used at this step.
	Alpha float64 `json:"alpha"`
	// QHat is q_t (±Inf possible).
	QHat float64 `json:"qhat"`
	// Err is err_t, the fraction of batch scores above q_t.
	Err float64 `json:"err"`
	// Weights are ω_i per trajectory, in batch order.
	Weights []float64 `json:"weights"`
	// AlphaNext is α_{t+1}.
	AlphaNext float64 `json:"alpha_next"`
}

// MarshalJSON writes the step with qhat as a number, or as the string
// "+Inf"/"-Inf" when infinite (JSON has no infinities).
func (s ACIStep) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		T         int       `json:"t"`
		Alpha     float64   `json:"alpha"`
		QHat      JSONFloat `json:"qhat"`
		Err       float64   `json:"err"`
		Weights   []float64 `json:"weights"`
		AlphaNext float64   `json:"alpha_next"`
	}{s.T, s.Alpha, JSONFloat(s.QHat), s.Err, s.Weights, s.AlphaNext})
}

// JSONFloat is a float64 that encodes ±Inf and NaN as the strings "+Inf",
// "-Inf" and "NaN" and accepts them (and numbers) back.
type JSONFloat float64

// MarshalJSON implements json.Marshaler.
func (f JSONFloat) MarshalJSON() ([]byte, error) {
	x := float64(f)
	switch {
	case math.IsInf(x, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(x, -1):
		return []byte(`"-Inf"`), nil
	case math.IsNaN(x):
		return []byte(`"NaN"`), nil
	}
	return json.Marshal(x)
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *JSONFloat) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("bad float %q", s)
		}
		*f = JSONFloat(x)
		return nil
	}
	var x float64
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	*f = JSONFloat(x)
	return nil
}

// NewACI returns a controller with α₁ = cfg.Alpha1 (ρ if 0) and the window
// preloaded with the last cfg.Window bootstrap scores (the untrained policy's
// scores on the calibration prompts; may be empty).
func NewACI(cfg ACIConfig, bootstrap []float64) (*ACI, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkFinite(bootstrap); err != nil {
		return nil, fmt.Errorf("aci: bootstrap: %w", err)
	}
	if cfg.Alpha1 == 0 {
		cfg.Alpha1 = cfg.Rho
	}
	a := &ACI{cfg: cfg, alpha: cfg.Alpha1}
	if cfg.WindowUnit == WindowScores {
		a.window = make([]float64, 0, min(cfg.Window, 1<<16))
	}
	a.push(bootstrap)
	return a, nil
}

// Config returns the controller's configuration (Alpha1 filled in).
func (a *ACI) Config() ACIConfig { return a.cfg }

// T returns the number of steps taken.
func (a *ACI) T() int { return a.t }

// Alpha returns α for the next step.
func (a *ACI) Alpha() float64 { return a.alpha }

// Window returns a copy of the window's scores, oldest first.
func (a *ACI) Window() []float64 {
	if a.cfg.WindowUnit == WindowIterations {
		var out []float64
		for _, b := range a.batches {
			out = append(out, b...)
		}
		return out
	}
	out := make([]float64, 0, len(a.window))
	out = append(out, a.window[a.head:]...)
	return append(out, a.window[:a.head]...)
}

// QHat returns q for the next step, Quantile(window, 1 − α), without stepping.
func (a *ACI) QHat() float64 {
	switch {
	case a.alpha <= 0:
		return math.Inf(1)
	case a.alpha >= 1:
		return math.Inf(-1)
	}
	a.scratch = append(a.scratch[:0], a.window...)
	for _, b := range a.batches {
		a.scratch = append(a.scratch, b...)
	}
	return quantileInPlace(a.scratch, 1-a.alpha, a.cfg.Quantile)
}

// LowConfidenceRate is the fraction of scores strictly above the threshold
// q: ACI's err_t = (1/B) Σ_i 1[s_i > q_t], and the error rate any fixed
// threshold would have had on the same batch (NaN for no scores).
func LowConfidenceRate(scores []float64, q float64) float64 {
	if len(scores) == 0 {
		return math.NaN()
	}
	above := 0
	for _, s := range scores {
		if s > q {
			above++
		}
	}
	return float64(above) / float64(len(scores))
}

// Step runs one ACI step on the batch's scores (see ACI). It fails, leaving
// the state unchanged, on an empty batch or a non-finite score.
func (a *ACI) Step(scores []float64) (ACIStep, error) {
	if len(scores) == 0 {
		return ACIStep{}, fmt.Errorf("aci step %d: %w", a.t+1, ErrEmptyScores)
	}
	if err := checkFinite(scores); err != nil {
		return ACIStep{}, fmt.Errorf("aci step %d: %w", a.t+1, err)
	}
	q := a.QHat()
	w := make([]float64, len(scores))
	for i, s := range scores {
		w[i] = 1
		if s > q {
			w[i] = a.cfg.Eta
		}
	}
	errT := LowConfidenceRate(scores, q)
	a.t++
	st := ACIStep{T: a.t, Alpha: a.alpha, QHat: q, Err: errT, Weights: w}
	c := a.cfg
	switch c.Rule {
	case RulePlain:
		a.alpha += c.Gamma * (c.Rho - errT)
	case RuleSmoothed:
		a.sNum = c.Decay*a.sNum + errT
		a.sDen = c.Decay*a.sDen + 1
		a.alpha += c.Gamma * (c.Rho - a.sNum/a.sDen)
	case RuleEMA:
		a.ema = c.Decay*a.ema + (1-c.Decay)*errT
		a.alpha = math.Min(c.AlphaMax, math.Max(c.AlphaMin, a.alpha+c.Gamma*(c.Rho-a.ema)))
	}
	st.AlphaNext = a.alpha
	a.push(scores)
	return st, nil
}

// push appends one iteration's scores to the window: a new batch, dropping
// the oldest beyond Window iterations (WindowIterations, an empty batch
// still counts as an iteration), or into the ring buffer, dropping the oldest
// scores beyond Window (WindowScores).
func (a *ACI) push(scores []float64) {
	w := a.cfg.Window
	if a.cfg.WindowUnit == WindowIterations {
		a.batches = append(a.batches, append([]float64(nil), scores...))
		if len(a.batches) > w {
			drop := len(a.batches) - w
			clear(a.batches[:drop])
			a.batches = a.batches[drop:]
		}
		return
	}
	if len(scores) > w {
		scores = scores[len(scores)-w:]
	}
	for _, s := range scores {
		if len(a.window) < w {
			a.window = append(a.window, s)
			continue
		}
		a.window[a.head] = s
		a.head++
		if a.head == w {
			a.head = 0
		}
	}
}

// checkFinite rejects NaN and ±Inf.
func checkFinite(xs []float64) error {
	for i, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("score %d is %v (scores must be finite)", i, x)
		}
	}
	return nil
}

// aciState is the serialized controller. Floats are written by encoding/json
// in their shortest round-trip form, so restoring is exact.
type aciState struct {
	Config ACIConfig `json:"config"`
	T      int       `json:"t"`
	Alpha  float64   `json:"alpha"`
	EMA    float64   `json:"ema"`
	SNum   float64   `json:"smooth_num"`
	SDen   float64   `json:"smooth_den"`
	Window []float64 `json:"window"`
	// Batches is the window of WindowIterations, one batch per iteration.
	Batches [][]float64 `json:"window_batches,omitempty"`
}

// MarshalJSON serializes the full controller state (config, t, α, the rule's
// running sums, and the window oldest first).
func (a *ACI) MarshalJSON() ([]byte, error) {
	st := aciState{Config: a.cfg, T: a.t, Alpha: a.alpha, EMA: a.ema, SNum: a.sNum, SDen: a.sDen}
	if a.cfg.WindowUnit == WindowIterations {
		st.Window, st.Batches = []float64{}, a.batches
	} else {
		st.Window = a.Window()
	}
	return json.Marshal(st)
}

// UnmarshalJSON restores a state written by MarshalJSON, validating it; a
// controller restored this way continues bit-for-bit like the original.
func (a *ACI) UnmarshalJSON(b []byte) error {
	var s aciState
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("aci state: %w", err)
	}
	if err := s.Config.Validate(); err != nil {
		return fmt.Errorf("aci state: %w", err)
	}
	if s.Config.Alpha1 == 0 {
		s.Config.Alpha1 = s.Config.Rho
	}
	finite := []float64{s.Alpha, s.EMA, s.SNum, s.SDen}
	if err := checkFinite(finite); err != nil {
		return errors.New("aci state: alpha, ema and smoothing sums must be finite")
	}
	if s.T < 0 || s.SNum < 0 || s.SDen < 0 {
		return errors.New("aci state: t and smoothing sums must be ≥ 0")
	}
	if len(s.Window) > s.Config.Window {
		return fmt.Errorf("aci state: window holds %d scores, more than its size %d", len(s.Window), s.Config.Window)
	}
	if err := checkFinite(s.Window); err != nil {
		return fmt.Errorf("aci state: window: %w", err)
	}
	if len(s.Batches) > s.Config.Window {
		return fmt.Errorf("aci state: window holds %d iterations, more than its size %d", len(s.Batches), s.Config.Window)
	}
	for i, b := range s.Batches {
		if err := checkFinite(b); err != nil {
			return fmt.Errorf("aci state: window iteration %d: %w", i, err)
		}
	}
	iter := s.Config.WindowUnit == WindowIterations
	if iter && len(s.Window) > 0 || !iter && len(s.Batches) > 0 {
		return fmt.Errorf("aci state: a window of %s must be saved as %s", s.Config.WindowUnit, map[bool]string{true: "window_batches", false: "window"}[iter])
	}
	*a = ACI{cfg: s.Config, t: s.T, alpha: s.Alpha, ema: s.EMA, sNum: s.SNum, sDen: s.SDen}
	if iter {
		for _, b := range s.Batches {
			a.push(b)
		}
		return nil
	}
	a.window = make([]float64, 0, min(s.Config.Window, 1<<16))
	a.push(s.Window)
	return nil
}
