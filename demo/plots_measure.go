package demo

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/cas-engine/cas/train"
)

// The measurement figures of a run (WriteMeasurePlots).
const (
	TrainingPNG    = "training.png"    // reward and EM against steps, raw and moving average
	SearchesPNG    = "searches.png"    // the share of rollouts that search, searches and redundant searches per trajectory against steps
	ACIPNG         = "aci.png"         // low-confidence ratio (ACI and a fixed threshold) against ρ, and α_t
	ReliabilityPNG = "reliability.png" // test EM against confidence exp(−answer-span NLL)
)

// smoothWindow is the moving-average window of the training curves: a
// fifth of the run, at least 2 and at most 20 steps.
func smoothWindow(steps int) int { return min(20, max(2, steps/5)) }

// stepSeries is one curve against training steps.
type stepSeries struct {
	name   string
	color  int
	dashed bool
	pts    plotter.XYs
}

// stepPanel draws each series raw (thin, faded) and as a trailing moving
// average over smooth steps (thick).
func stepPanel(title, ylabel string, series []stepSeries, smooth int) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "training step"
	p.Y.Label.Text = ylabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for _, s := range series {
		if len(s.pts) == 0 {
			continue
		}
		c := plotutil.Color(s.color)
		raw, err := plotter.NewLine(s.pts)
		if err != nil {
			return nil, fmt.Errorf("plot %s, %s: %w", title, s.name, err)
		}
		r, g, b, _ := c.RGBA()
		raw.Color = color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 90}
		raw.Width = vg.Points(0.8)
		avg, err := plotter.NewLine(train.MovingAverage(s.pts, smooth))
		if err != nil {
			return nil, fmt.Errorf("plot %s, %s: %w", title, s.name, err)
		}
		avg.Color, avg.Width = c, vg.Points(2)
		if s.dashed {
			avg.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(raw, avg)
		p.Legend.Add(s.name, avg)
	}
	return p, nil
}

// metricSeries is one variant's metric against its steps.
func metricSeries(ms []train.StepMetrics, f func(i int, m train.StepMetrics) float64) plotter.XYs {
	pts := make(plotter.XYs, 0, len(ms))
	for i, m := range ms {
		if y := f(i, m); !math.IsNaN(y) {
			pts = append(pts, plotter.XY{X: float64(m.Step), Y: y})
		}
	}
	return pts
}

// WriteMeasurePlots draws the measurement figures of a run into dir:
// TrainingPNG, SearchesPNG and ACIPNG from the variants' training metrics
// (when GRPO ran) and ReliabilityPNG from the evaluations.
func WriteMeasurePlots(dir string, res *Result) error {
	var names []string
	for v := range res.Trained() {
		names = append(names, v.Name)
	}
	if len(names) > 0 {
		steps := len(res.Metrics[names[0]])
		smooth := smoothWindow(steps)
		per := func(f func(i int, m train.StepMetrics) float64) []stepSeries {
			out := make([]stepSeries, len(names))
			for i, n := range names {
				out[i] = stepSeries{name: n, color: i, pts: metricSeries(res.Metrics[n], f)}
			}
			return out
		}
		// withRef adds the frozen warm start's rollouts on the same prompts,
		// dashed: the curve a variant's is read against.
		withRef := func(f func(i int, m train.StepMetrics) float64) []stepSeries {
			out := per(f)
			if len(res.NoUpdate) > 0 {
				out = append(out, stepSeries{name: "no update (warm start)", color: len(names), dashed: true, pts: metricSeries(res.NoUpdate, f)})
			}
			return out
		}
		figs := []struct {
			file   string
			panels []struct {
				title, ylabel string
				series        []stepSeries
			}
		}{
			{TrainingPNG, []struct {
				title, ylabel string
				series        []stepSeries
			}{
				{fmt.Sprintf("Reward (moving average of %d)", smooth), "mean reward (Eq. 5)", withRef(func(_ int, m train.StepMetrics) float64 { return m.Reward })},
				{fmt.Sprintf("Exact match (moving average of %d)", smooth), "EM of the rollouts", withRef(func(_ int, m train.StepMetrics) float64 { return m.EM })},
			}},
			{SearchesPNG, []struct {
				title, ylabel string
				series        []stepSeries
			}{
				{"Rollouts that search", "share with ≥ 1 search", withRef(func(_ int, m train.StepMetrics) float64 { return m.Searched })},
				{"Searches", "searches per trajectory", per(func(_ int, m train.StepMetrics) float64 { return m.SearchCalls })},
				{"Redundant searches", "redundant searches per trajectory", per(func(_ int, m train.StepMetrics) float64 { return m.Redundant })},
			}},
		}
		var low []stepSeries
		for i, n := range names {
			ms := res.Metrics[n]
			fixed := FixedThresholdErr(ms)
			low = append(low,
				stepSeries{name: n + " (ACI q_t)", color: i, pts: metricSeries(ms, func(_ int, m train.StepMetrics) float64 { return m.LowConfidence })},
				stepSeries{name: n + " (fixed q_1)", color: i, dashed: true, pts: metricSeries(ms, func(k int, _ train.StepMetrics) float64 { return fixed[k] })})
		}
		for _, fig := range figs {
			row := make([]*plot.Plot, len(fig.panels))
			for j, pn := range fig.panels {
				p, err := stepPanel(pn.title, pn.ylabel, pn.series, smooth)
				if err != nil {
					return err
				}
				row[j] = p
			}
			if err := train.WritePlotRow(filepath.Join(dir, fig.file), row); err != nil {
				return err
			}
		}
		lowP, err := stepPanel(fmt.Sprintf("Low-confidence ratio, target ρ = %g", res.Config.GRPO.Rho), "fraction of scores above the threshold", low, smooth)
		if err != nil {
			return err
		}
		first := res.Metrics[names[0]]
		rho, err := plotter.NewLine(plotter.XYs{{X: float64(first[0].Step), Y: res.Config.GRPO.Rho}, {X: float64(first[len(first)-1].Step), Y: res.Config.GRPO.Rho}})
		if err != nil {
			return err
		}
		rho.Color, rho.Dashes = color.Black, []vg.Length{vg.Points(2), vg.Points(2)}
		lowP.Add(rho)
		lowP.Legend.Add("ρ", rho)
		alphaP, err := stepPanel("ACI level α_t", "α_t", per(func(_ int, m train.StepMetrics) float64 { return m.Alpha }), 1)
		if err != nil {
			return err
		}
		if err := train.WritePlotRow(filepath.Join(dir, ACIPNG), []*plot.Plot{lowP, alphaP}); err != nil {
			return err
		}
	}
	return plotReliability(filepath.Join(dir, ReliabilityPNG), res.Evals)
}

// plotReliability draws each search-agent evaluation's reliability bins:
// EM against mean confidence exp(−NLL), with the diagonal of a calibrated
// policy.
func plotReliability(path string, evals []EvalResult) error {
	p := plot.New()
	p.Title.Text = "Reliability of the answer-span NLL (test split)"
	p.X.Label.Text = "confidence exp(−answer-span NLL), bin mean"
	p.Y.Label.Text = "EM in the bin"
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	p.Add(plotter.NewGrid())
	diag, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		return err
	}
	diag.Color, diag.Dashes = color.Gray{Y: 128}, []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(diag)
	p.Legend.Top, p.Legend.Left = true, true
	for i, e := range evals {
		if e.Mode == "direct" || len(e.Reliability) == 0 {
			continue
		}
		pts := make(plotter.XYs, len(e.Reliability))
		for j, b := range e.Reliability {
			pts[j] = plotter.XY{X: b.Confidence, Y: b.EM}
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("plot %s, %s: %w", path, e.Name, err)
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		points.Radius = vg.Points(3)
		p.Add(line, points)
		p.Legend.Add(fmt.Sprintf("%s (ECE %.3f)", e.Name, e.ECE), line, points)
	}
	return savePlot(path, p, 6*vg.Inch, 5*vg.Inch)
}

// emSeries is one series of an EM-per-policy figure: a value and a ± error
// per policy.
type emSeries struct {
	label     string
	vals, err []float64
}

// plotEMWithErrors draws, for each policy (nominal x), one point per series
// with its ± error bar, the series side by side.
func plotEMWithErrors(path, title string, names []string, series []emSeries) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "EM"
	p.Y.Min, p.Y.Max = 0, 1
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for k, s := range series {
		off := 0.22 * (float64(k) - float64(len(series)-1)/2)
		pts := make(errPoints, len(s.vals))
		for i := range s.vals {
			pts[i] = errPoint{x: float64(i) + off, y: s.vals[i], e: s.err[i]}
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		sc.Color, sc.Shape, sc.Radius = plotutil.Color(k), plotutil.Shape(k), vg.Points(3.5)
		eb, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		eb.LineStyle.Color, eb.LineStyle.Width = plotutil.Color(k), vg.Points(1.2)
		p.Add(eb, sc)
		p.Legend.Add(s.label, sc)
	}
	p.NominalX(names...)
	return savePlot(path, p, vg.Length(max(6, 1.1*float64(len(names))))*vg.Inch, 4*vg.Inch)
}

// errPoint is a value with a symmetric ± error.
type errPoint struct{ x, y, e float64 }

type errPoints []errPoint

func (e errPoints) Len() int                         { return len(e) }
func (e errPoints) XY(i int) (float64, float64)      { return e[i].x, e[i].y }
func (e errPoints) YError(i int) (low, high float64) { return e[i].e, e[i].e }
