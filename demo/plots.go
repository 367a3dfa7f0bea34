package demo

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/train"
)

// Plot files of a run, besides the trainer's train.Figure2PNG (search
// calls, low-confidence ratio and α_t against steps: the paper's Figure 2)
// and train.RewardPNG (reward, EM and documents per search against steps).
const (
	APSHistogramPNG = "aps_set_size.png"
	WarmLossPNG     = "warm_start_loss.png"
	EvalPNG         = "eval_em.png"
)

// WritePlots draws the run's figures into dir: the training curves of every
// variant (the trainer's two figures), the APS set-size histogram on the
// test split for each calibrated level, the warm start's cross-entropy, and
// the test EM of every evaluation.
func WritePlots(dir string, res *Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var runs []train.PlotRun
	for v, ms := range res.Trained() {
		runs = append(runs, train.PlotRun{Name: v.Name, Metrics: ms})
	}
	if len(runs) > 0 {
		if _, err := train.WritePlots(runs, dir, 1); err != nil {
			return err
		}
	}
	if err := plotAPSHistogram(filepath.Join(dir, APSHistogramPNG), res); err != nil {
		return err
	}
	if res.Warm != nil && len(res.Warm.Losses) > 0 {
		if err := plotWarmLoss(filepath.Join(dir, WarmLossPNG), res.Warm.Losses); err != nil {
			return err
		}
	}
	if err := WriteMeasurePlots(dir, res); err != nil {
		return err
	}
	return plotEvalEM(filepath.Join(dir, EvalPNG), res.Evals)
}

// savePlot writes p as a PNG, atomically.
func savePlot(path string, p *plot.Plot, w, h vg.Length) error {
	wt, err := p.WriterTo(w, h, "png")
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return atomicfile.Write(path, func(out io.Writer) error {
		_, err := wt.WriteTo(out)
		return err
	})
}

// plotAPSHistogram draws, for each APS level, the fraction of test hop
// queries keeping k passages.
func plotAPSHistogram(path string, res *Result) error {
	p := plot.New()
	p.Title.Text = "APS prediction-set size on the test split"
	p.X.Label.Text = "passages kept per search"
	p.Y.Label.Text = "fraction of queries"
	p.Add(plotter.NewGrid())
	keys := make([]string, 0, len(res.APS))
	for k := range res.APS {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w := vg.Points(48 / float64(max(1, len(keys))))
	for i, k := range keys {
		rep := res.APS[k]
		vals := make(plotter.Values, len(rep.Histogram))
		for j, c := range rep.Histogram {
			vals[j] = float64(c) / float64(max(1, rep.Test))
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		bars.Offset = w * vg.Length(float64(i)-float64(len(keys)-1)/2)
		bars.Color = plotutil.Color(i)
		bars.LineStyle.Width = 0
		p.Add(bars)
		p.Legend.Add(fmt.Sprintf("α = %s (mean %.2f)", k, rep.MeanKept), bars)
	}
	p.Legend.Top = true
	p.NominalX(nominal(len(res.APS[keys[0]].Histogram))...)
	return savePlot(path, p, 6*vg.Inch, 4*vg.Inch)
}

func nominal(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}

// plotWarmLoss draws the warm start's per-step cross-entropy.
func plotWarmLoss(path string, losses []float64) error {
	p := plot.New()
	p.Title.Text = "Supervised warm start"
	p.X.Label.Text = "optimiser step"
	p.Y.Label.Text = "cross-entropy (nats per policy token)"
	p.Add(plotter.NewGrid())
	pts := make(plotter.XYs, len(losses))
	for i, l := range losses {
		pts[i] = plotter.XY{X: float64(i + 1), Y: l}
	}
	line, err := plotter.NewLine(pts)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	line.Color = plotutil.Color(0)
	p.Add(line)
	return savePlot(path, p, 6*vg.Inch, 4*vg.Inch)
}

// plotEvalEM draws single-hop, two-hop and overall EM of every evaluation
// with ± one binomial standard error (EMStdErr).
func plotEvalEM(path string, evals []EvalResult) error {
	if len(evals) == 0 {
		return nil
	}
	names := make([]string, len(evals))
	series := []emSeries{{label: "single-hop"}, {label: "two-hop"}, {label: "overall"}}
	for i, e := range evals {
		names[i] = e.Name
		for k, v := range [][2]float64{{e.EMSingle, float64(e.Single)}, {e.EMTwoHop, float64(e.TwoHop)}, {e.EM, float64(e.Questions)}} {
			series[k].vals = append(series[k].vals, v[0])
			series[k].err = append(series[k].err, EMStdErr(v[0], int(v[1])))
		}
	}
	return plotEMWithErrors(path, "Exact match on the test split (± one binomial standard error)", names, series)
}
