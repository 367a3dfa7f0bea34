package cpubench

import (
	"fmt"
	"io"
	"math"
	"strconv"
)

// WriteMarkdown prints the report as the README's performance tables, with
// the ratios measured in this run.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "Machine: %s; %d threads; %s; GEMM kernels %s; %s; load average %.2f before, %.2f after.\n\n",
		r.CPU, r.Threads, r.GoVersion, r.Kernels, r.Date.Format("2006-01-02 15:04 MST"), r.LoadBefore, r.LoadAfter)

	// The limit of N threads is at least N times one core's: on a shared
	// machine both cores are rarely free during a whole burst.
	fma, vek := r.Limits()
	fmt.Fprintf(w, "| limit (GFLOP/s) | 1 thread | %d threads, measured | %d threads, limit used |\n|---|---:|---:|---:|\n", r.Threads, r.Threads)
	fmt.Fprintf(w, "| FMA peak (independent FMAs in registers) | %s | %s | %s |\n", num(r.PeakFMA1, 1), num(r.PeakFMA, 1), num(fma, 1))
	fmt.Fprintf(w, "| tight vek FMA loop (vek32.Dot, L1-resident) | %s | %s | %s |\n\n", num(r.PeakVek1, 1), num(r.PeakVek, 1), num(vek, 1))

	fmt.Fprintf(w, "| product | threads | GFLOP/s | of FMA peak | of vek loop |\n|---|---:|---:|---:|---:|\n")
	for _, g := range r.GEMM {
		peak, vl := fma, vek
		if g.Threads == 1 {
			peak, vl = r.PeakFMA1, r.PeakVek1
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s |\n", g.Name, g.Threads, num(g.GFLOPS, 1), pct(g.GFLOPS, peak), pct(g.GFLOPS, vl))
	}
	if len(r.Models) == 0 {
		return
	}
	m0 := r.Models[0]
	fmt.Fprintf(w, "\nQwen-shaped models, forward and training step on %d×%d tokens, %d threads (PyTorch: torch_qwen_peer.py, same threads):\n\n",
		m0.Batch, m0.SeqLen, r.Threads)
	fmt.Fprintf(w, "| model | params | forward tok/s gocpu | PyTorch | gocpu/PyTorch | train step gocpu | PyTorch | PyTorch/gocpu | decode tok/s gocpu | pure-Go | gocpu/pure-Go |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range r.Models {
		var pf, pt float64
		if m.Peer != nil {
			pf, pt = m.Peer.ForwardTokS, m.Peer.TrainStepS
		}
		fmt.Fprintf(w, "| %s | %.1fM | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			m.Name, float64(m.Params)/1e6,
			num(m.Fast.ForwardTokS, 0), num(pf, 0), ratio(m.Fast.ForwardTokS, pf),
			secs(m.Fast.TrainStepS), secs(pt), ratio(pt, m.Fast.TrainStepS),
			num(m.Fast.DecodeTokS, 1), num(m.Plain.DecodeTokS, 1), ratio(m.Fast.DecodeTokS, m.Plain.DecodeTokS))
	}
	plain := false
	for _, m := range r.Models {
		plain = plain || m.Plain.ForwardTokS > 0
	}
	if plain {
		fmt.Fprintf(w, "\n| model | forward tok/s pure-Go | gocpu/pure-Go |\n|---|---:|---:|\n")
		for _, m := range r.Models {
			fmt.Fprintf(w, "| %s | %s | %s |\n", m.Name, num(m.Plain.ForwardTokS, 0), ratio(m.Fast.ForwardTokS, m.Plain.ForwardTokS))
		}
	}
	for _, m := range r.Models {
		if m.PeerErr != "" {
			fmt.Fprintf(w, "\nPyTorch peer for %s not measured: %s\n", m.Name, m.PeerErr)
		}
	}
}

// Limits returns the FMA-peak and vek-loop limits of r.Threads threads:
// the larger of the all-thread measurement and Threads times the one-thread
// measurement.
func (r *Report) Limits() (fma, vek float64) {
	n := float64(r.Threads)
	return max(r.PeakFMA, n*r.PeakFMA1), max(r.PeakVek, n*r.PeakVek1)
}

// ratio formats a/b as "1.23×", or "–" when either is missing.
func ratio(a, b float64) string {
	if !(a > 0) || !(b > 0) || math.IsInf(a, 0) || math.IsInf(b, 0) {
		return "–"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}

func pct(a, b float64) string {
	if !(a > 0) || !(b > 0) {
		return "–"
	}
	return strconv.FormatFloat(100*a/b, 'f', 0, 64) + "%"
}

func num(v float64, prec int) string {
	if !(v > 0) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func secs(v float64) string {
	if !(v > 0) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', 3, 64) + " s"
}
