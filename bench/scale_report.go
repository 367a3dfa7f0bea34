package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/cas-engine/cas/internal/vectest"
)

// GRPOStepQueries is the retrieval batch of one GRPO step of the paper:
// 512 prompts × 5 searches, sent through one batched search.
const GRPOStepQueries = 512 * 5

// ScaleTarget is the size the table projects to: wiki-18's 21M passages.
const ScaleTarget = 21_000_000

// linFit is the least-squares line y = a + b·x.
func linFit(x, y []float64) (a, b float64) {
	n := float64(len(x))
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
		sxx += x[i] * x[i]
		sxy += x[i] * y[i]
	}
	den := n*sxx - sx*sx
	if len(x) < 2 || den == 0 {
		return sy / n, 0
	}
	b = (n*sxy - sx*sy) / den
	return (sy - b*sx) / n, b
}

// ScaleProjection is one configuration's figures at ScaleTarget rows.
type ScaleProjection struct {
	Config                       string
	BuildS                       float64
	BuildPeak, ServePeak, Bytes  float64
	SingleMs, BatchQPS, Recall10 float64
}

// Project fits each figure of a configuration over the measured sizes and
// evaluates it at n rows: times, bytes and seconds per batched query are
// least-squares lines in N (linear cost growth, the flat scan's law and an
// upper bound for IVF at a fixed nprobe over √N-scaled lists); recall@10 is
// a line in log N, clamped to [0, 1].
//
// label is a row's Label (configuration and settings). A flat index
// searched from disk (larger than memory) has no batch or recall figure:
// those fits use the other sizes, and its single-query time is left out
// of the in-memory fit.
func (r *ScaleReport) Project(label string, n int) ScaleProjection {
	var xs, lx []float64
	var build, bpeak, speak, bytes, single, secPerQ, rec []float64
	for _, row := range r.Rows {
		if row.Label() != label {
			continue
		}
		xs = append(xs, float64(row.N))
		lx = append(lx, math.Log(float64(row.N)))
		build = append(build, row.BuildS)
		bpeak = append(bpeak, float64(row.BuildPeak))
		speak = append(speak, float64(row.ServePeak))
		bytes = append(bytes, float64(row.IndexBytes))
		if row.DiskS > 0 {
			single = append(single, math.NaN())
			secPerQ = append(secPerQ, math.NaN())
		} else {
			single = append(single, row.SingleMs)
			secPerQ = append(secPerQ, 1/row.BatchQPS)
		}
		rec = append(rec, row.Recall10)
	}
	at := func(x, y []float64, v float64) float64 {
		var fx, fy []float64
		for i := range y {
			if !math.IsNaN(y[i]) && !math.IsInf(y[i], 0) {
				fx, fy = append(fx, x[i]), append(fy, y[i])
			}
		}
		if len(fy) == 0 {
			return math.NaN()
		}
		a, b := linFit(fx, fy)
		return max(a+b*v, 0) // a cost is never negative, whatever two noisy points say
	}
	N := float64(n)
	p := ScaleProjection{Config: label,
		BuildS: at(xs, build, N), BuildPeak: at(xs, bpeak, N), ServePeak: at(xs, speak, N),
		Bytes: at(xs, bytes, N), SingleMs: at(xs, single, N),
		Recall10: math.Min(1, math.Max(0, at(lx, rec, math.Log(N))))}
	if s := at(xs, secPerQ, N); s > 0 {
		p.BatchQPS = 1 / s
	}
	return p
}

func gib(b float64) float64 { return b / (1 << 30) }

// WriteMarkdown prints the measured table, the projection to 21M and a
// sentence per configuration on the two reference machines.
func (r *ScaleReport) WriteMarkdown(w io.Writer) {
	o := r.Opt
	fmt.Fprintf(w, "\n#### Cost growth: synthetic %s sets (%s), d = %d, %d threads\n\n", o.Gen, genText(o), o.Dim, r.Threads)
	fmt.Fprintf(w, "IVF: nlist = %s; IVF-PQ: exact re-rank from the F32 file (read by pread). Recall@10 against exact search on %d queries; single-query latency over the same %d; batch q/s over one batch of %d. A flat index larger than the memory available is timed on one query read from disk, without batch or recall (—).\n\n",
		nlistText(o.NList), o.Recall, o.Recall, o.Batch)
	fmt.Fprintln(w, "| N | config | build s | build peak GiB | index file GiB | serve peak GiB | single ms | batch q/s | recall@10 |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, row := range r.Rows {
		reset := ""
		if !row.ServeReset {
			reset = " (incl. build)"
		}
		batch, recall := fmt.Sprintf("%.0f", row.BatchQPS), fmt.Sprintf("%.3f", row.Recall10)
		single := fmt.Sprintf("%.2f", row.SingleMs)
		if row.DiskS > 0 {
			batch, recall = "—", "—"
			single = fmt.Sprintf("%.0f (exceeds RAM: %.1f s for one query from disk)", row.SingleMs, row.DiskS)
		}
		fmt.Fprintf(w, "| %s | %s | %.1f | %.2f | %.2f | %.2f%s | %s | %s | %s |\n",
			countText(row.N), row.Label(), row.BuildS, gib(float64(row.BuildPeak)), gib(float64(row.IndexBytes)),
			gib(float64(row.ServePeak)), reset, single, batch, recall)
	}
	sizes := map[int]bool{}
	for _, row := range r.Rows {
		sizes[row.N] = true
	}
	if len(sizes) < 2 {
		// One point fixes no slope: a "projection" would print the
		// measured figures again as if they held at 21M.
		fmt.Fprintf(w, "\nNo projection to %s: a least-squares line needs at least two sizes, and this run measured one (pass two or more to --sizes).\n", countText(ScaleTarget))
		return
	}
	fmt.Fprintf(w, "\n#### Projection to %s (least squares over %d sizes: linear in N for times, bytes and seconds per batched query; recall linear in log N)\n\n", countText(ScaleTarget), len(sizes))
	fmt.Fprintf(w, "| config | build s | build peak GiB | serve peak GiB | single ms | batch q/s | recall@10 | GRPO step (%d q), %d threads | 32 cores |\n", GRPOStepQueries, r.Threads)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	var notes []string
	var labels []string
	for _, row := range r.Rows {
		if !slices.Contains(labels, row.Label()) {
			labels = append(labels, row.Label())
		}
	}
	for _, c := range labels {
		p := r.Project(c, ScaleTarget)
		step := float64(GRPOStepQueries) / p.BatchQPS // +Inf where the fit gives no rate
		step32 := step * float64(r.Threads) / 32
		fmt.Fprintf(w, "| %s | %.0f | %.1f | %.1f | %.1f | %.0f | %.3f | %.1f s | %.1f s |\n",
			c, p.BuildS, gib(p.BuildPeak), gib(p.ServePeak), p.SingleMs, p.BatchQPS, p.Recall10, step, step32)
		notes = append(notes, fmt.Sprintf("- **%s**: %s on a 24 GB / 2-core machine (%.1f s of retrieval per GRPO step); %s on a 64 GB / 32-core one (≈ %.1f s if search scales linearly with cores).",
			c, fits(p, 24), step*float64(r.Threads)/2, fits(p, 64), step32))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, strings.Join(notes, "\n"))
}

// fits says whether a projected configuration builds and serves within
// gb gigabytes (resident peaks; an index that is memory-mapped larger than
// memory still runs, reading the file from disk on every scan).
func fits(p ScaleProjection, gb float64) string {
	limit := gb * 1e9 * 0.9 // leave a tenth to the OS and the model
	switch {
	case p.ServePeak <= limit && p.BuildPeak <= limit:
		return fmt.Sprintf("fits (serve %.1f GiB, build %.1f GiB)", gib(p.ServePeak), gib(p.BuildPeak))
	case p.ServePeak <= limit:
		return fmt.Sprintf("serves (%.1f GiB) but its build peaks at %.1f GiB", gib(p.ServePeak), gib(p.BuildPeak))
	default:
		return fmt.Sprintf("does not fit in memory (%.1f GiB resident: a memory-mapped scan would read the file from disk)", gib(p.ServePeak))
	}
}

// genText says what the synthetic set is.
func genText(o ScaleOptions) string {
	switch o.Gen {
	case vectest.GenLowRank:
		return fmt.Sprintf("vectest.LowRankGen: a rank-%d Gaussian mapped to d plus isotropic noise, no cluster structure", o.Rank)
	case vectest.GenE5Mix:
		return "vectest.E5MixGen: a shared direction, a 7-level topic tree and a power-law spectrum, fitted to the 1,000 real E5-base-v2 wiki-18 passage vectors"
	}
	return o.Gen
}

func nlistText(n int) string {
	if n > 0 {
		return fmt.Sprint(n)
	}
	return "√N (power of two)"
}

func countText(n int) string {
	switch {
	case n >= 1_000_000 && n%100_000 == 0:
		return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e6), "0"), ".") + "M"
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
