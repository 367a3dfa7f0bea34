package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
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
func (r *ScaleReport) Project(config string, n int) ScaleProjection {
	var xs, lx []float64
	var build, bpeak, speak, bytes, single, secPerQ, rec []float64
	for _, row := range r.Rows {
		if row.Config != config {
			continue
		}
		xs = append(xs, float64(row.N))
		lx = append(lx, math.Log(float64(row.N)))
		build = append(build, row.BuildS)
		bpeak = append(bpeak, float64(row.BuildPeak))
		speak = append(speak, float64(row.ServePeak))
		bytes = append(bytes, float64(row.IndexBytes))
		single = append(single, row.SingleMs)
		secPerQ = append(secPerQ, 1/row.BatchQPS)
		rec = append(rec, row.Recall10)
	}
	at := func(x, y []float64, v float64) float64 {
		if len(y) == 0 {
			return math.NaN()
		}
		a, b := linFit(x, y)
		return max(a+b*v, 0) // a cost is never negative, whatever two noisy points say
	}
	N := float64(n)
	p := ScaleProjection{Config: config,
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
	fmt.Fprintf(w, "\n#### Cost growth: synthetic low-rank sets, d = %d, %d threads\n\n", o.Dim, r.Threads)
	fmt.Fprintf(w, "IVF: nlist = %s, nprobe %d; IVF-PQ: %d bytes/vector, exact re-rank of %d candidates from the F32 file. Recall@10 against exact search on %d queries; single-query latency over the same %d; batch q/s over one batch of %d.\n\n",
		nlistText(o.NList), o.NProbe, o.PQ, o.Rerank, o.Recall, o.Recall, o.Batch)
	fmt.Fprintln(w, "| N | config | build s | build peak GiB | index file GiB | serve peak GiB | single ms | batch q/s | recall@10 |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, row := range r.Rows {
		reset := ""
		if !row.ServeReset {
			reset = " (incl. build)"
		}
		fmt.Fprintf(w, "| %s | %s | %.1f | %.2f | %.2f | %.2f%s | %.2f | %.0f | %.3f |\n",
			countText(row.N), row.Config, row.BuildS, gib(float64(row.BuildPeak)), gib(float64(row.IndexBytes)),
			gib(float64(row.ServePeak)), reset, row.SingleMs, row.BatchQPS, row.Recall10)
	}
	sizes := map[int]bool{}
	for _, row := range r.Rows {
		sizes[row.N] = true
	}
	fmt.Fprintf(w, "\n#### Projection to %s (least squares over %d sizes: linear in N for times, bytes and seconds per batched query; recall linear in log N)\n\n", countText(ScaleTarget), len(sizes))
	fmt.Fprintf(w, "| config | build s | build peak GiB | serve peak GiB | single ms | batch q/s | recall@10 | GRPO step (%d q), %d threads | 32 cores |\n", GRPOStepQueries, r.Threads)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	var notes []string
	for _, c := range o.Configs {
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
