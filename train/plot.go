package train

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/cas-engine/cas/internal/atomicfile"
)

// PlotRun is one run's metrics, labelled for a legend.
type PlotRun struct {
	Name    string
	Metrics []StepMetrics
}

// LoadPlotRuns reads the metrics.jsonl of each run folder; the label is the
// run's config name (the folder's name when the metrics do not carry one).
func LoadPlotRuns(dirs ...string) ([]PlotRun, error) {
	if len(dirs) == 0 {
		return nil, errors.New("plot: no run folders")
	}
	var runs []PlotRun
	for _, d := range dirs {
		ms, err := ReadMetrics(filepath.Join(d, MetricsFile))
		if err != nil {
			return nil, err
		}
		if len(ms) == 0 {
			return nil, fmt.Errorf("plot: %s has no metrics yet", filepath.Join(d, MetricsFile))
		}
		name := ms[0].Run
		if name == "" {
			name = filepath.Base(filepath.Clean(d))
		}
		runs = append(runs, PlotRun{Name: name, Metrics: ms})
	}
	return runs, nil
}

// plotPanel is one panel: a metric against the training step.
type plotPanel struct {
	title, ylabel string
	value         func(StepMetrics) float64
}

// figure2Panels are the paper's Figure 2: search calls per trajectory, the
// low-confidence ratio (fraction of trajectories ACI down-weights) and the
// ACI level α_t, against training steps.
var figure2Panels = []plotPanel{
	{"Search calls", "searches per trajectory", func(m StepMetrics) float64 { return m.SearchCalls }},
	{"Low-confidence ratio", "fraction with ω = η", func(m StepMetrics) float64 { return m.LowConfidence }},
	{"ACI level α_t", "α_t", func(m StepMetrics) float64 { return m.Alpha }},
}

var rewardPanels = []plotPanel{
	{"Reward", "mean reward (Eq. 5)", func(m StepMetrics) float64 { return m.Reward }},
	{"Exact match", "EM", func(m StepMetrics) float64 { return m.EM }},
	{"Documents per search", "passages kept", func(m StepMetrics) float64 { return m.DocsPerSearch }},
}

// PlotFiles are the PNGs WritePlots writes.
const (
	Figure2PNG = "figure2.png"
	RewardPNG  = "reward_em.png"
)

// WritePlots draws the runs' curves into outDir (created if missing):
// figure2.png (the paper's Figure 2: search calls, low-confidence ratio and
// α_t against steps, the runs overlaid) and reward_em.png (reward, EM and
// documents per search). smooth > 1 draws a trailing moving average over
// that many steps. It returns the files written.
func WritePlots(runs []PlotRun, outDir string, smooth int) ([]string, error) {
	if len(runs) == 0 {
		return nil, errors.New("plot: no runs")
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	var out []string
	for _, fig := range []struct {
		file   string
		panels []plotPanel
	}{{Figure2PNG, figure2Panels}, {RewardPNG, rewardPanels}} {
		path := filepath.Join(outDir, fig.file)
		if err := writePanels(path, runs, fig.panels, smooth); err != nil {
			return out, err
		}
		out = append(out, path)
	}
	return out, nil
}

// writePanels draws one row of panels into a PNG, atomically.
func writePanels(path string, runs []PlotRun, panels []plotPanel, smooth int) error {
	row := make([]*plot.Plot, len(panels))
	for j, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "training step"
		p.Y.Label.Text = pn.ylabel
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		for i, r := range runs {
			pts := make(plotter.XYs, len(r.Metrics))
			for k, m := range r.Metrics {
				pts[k] = plotter.XY{X: float64(m.Step), Y: pn.value(m)}
			}
			pts = MovingAverage(pts, smooth)
			line, err := plotter.NewLine(pts)
			if err != nil {
				return fmt.Errorf("plot %s, run %s: %w", pn.title, r.Name, err)
			}
			line.Color = plotutil.Color(i)
			line.Dashes = plotutil.Dashes(i)
			line.Width = vg.Points(1.5)
			p.Add(line)
			if j == 0 {
				p.Legend.Add(r.Name, line)
			}
		}
		row[j] = p
	}
	return WritePlotRow(path, row)
}

// WritePlotRow draws plots side by side, 4 × 3.2 inches each, into one
// PNG, atomically.
func WritePlotRow(path string, row []*plot.Plot) error {
	const panelW, h = 4 * vg.Inch, 3.2 * vg.Inch
	img := vgimg.New(panelW*vg.Length(len(row)), h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2,
		PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{row}, tiles, dc)
	for j, p := range row {
		p.Draw(canvases[0][j])
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
		return err
	})
}

// MovingAverage replaces each Y by the mean of the last n points (n ≤ 1:
// unchanged); NaN values are skipped.
func MovingAverage(pts plotter.XYs, n int) plotter.XYs {
	if n <= 1 {
		return pts
	}
	out := make(plotter.XYs, len(pts))
	for i := range pts {
		sum, k := 0.0, 0
		for j := max(0, i-n+1); j <= i; j++ {
			if y := pts[j].Y; y == y {
				sum += y
				k++
			}
		}
		out[i] = plotter.XY{X: pts[i].X, Y: sum / float64(max(k, 1))}
	}
	return out
}
