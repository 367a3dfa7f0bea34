package cpubench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cas-engine/cas/backend/gocpu"
	"github.com/cas-engine/cas/internal/blascore"
)

// WriteMarkdown prints the report as the README's performance tables, with
// the ratios measured in this run.
func (r *Report) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "Machine: %s; %d threads; %s; GEMM kernels %s; %s; load average %.2f before, %.2f after.\n\n",
		r.CPU, r.Threads, r.GoVersion, r.Kernels, r.Date.Format("2006-01-02 15:04 MST"), r.LoadBefore, r.LoadAfter)

	if r.DecodeOnly {
		r.writeDecode(w)
		for _, m := range r.Models {
			writeProfile(w, fmt.Sprintf("%s, batch-1 decode of %d tokens through the step graph", m.Name, m.DecodeProfileTokens), m.DecodeProfile, 0, m.DecodeProfileTokens)
		}
		return
	}
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
	fmt.Fprintf(w, "\nQwen-shaped models, forward and training step on %d×%d tokens, %d threads (PyTorch: torch_qwen_peer.py through peer_env.py, same threads):\n\n",
		m0.Batch, m0.SeqLen, r.Threads)
	fmt.Fprintf(w, "| model | params | forward tok/s gocpu | PyTorch | gocpu/PyTorch | train step gocpu | PyTorch | PyTorch/gocpu | PyTorch BLAS |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, m := range r.Models {
		var pf, pt float64
		blas := "–"
		fr, tr := "–", "–"
		if m.Peer != nil {
			pf, pt = m.Peer.ForwardTokS, m.Peer.TrainStepS
			blas = m.Peer.BLAS
			if fair, why := m.Peer.Fair(); fair {
				fr, tr = ratio(m.Fast.ForwardTokS, pf), ratio(pt, m.Fast.TrainStepS)
			} else {
				fr, tr = "no ratio: "+why, "no ratio: "+why
			}
		}
		fmt.Fprintf(w, "| %s | %.1fM | %s | %s | %s | %s | %s | %s | %s |\n",
			m.Name, float64(m.Params)/1e6,
			num(m.Fast.ForwardTokS, 0), num(pf, 0), fr,
			secs(m.Fast.TrainStepS), secs(pt), tr, blas)
	}

	r.writeRounds(w)

	// Roofline: the matrix work at the measured GEMM rate, and the ratio
	// to the peer that running exactly at it would give.
	fmt.Fprintf(w, "\nRoofline: matrix FLOPs of the step ÷ the measured %s GFLOP/s of the square GEMM (elementwise work not counted). PyTorch ÷ roofline is the peer's time (median over the rounds) ÷ the roofline: the gocpu/PyTorch ratio a step running exactly at the roofline would show.\n\n", num(r.GEMMRate, 1))
	fmt.Fprintf(w, "| model | forward GFLOP | forward roofline | forward gocpu | × roofline | PyTorch ÷ roofline | train GFLOP | train roofline | train step gocpu | × roofline | PyTorch ÷ roofline |\n")
	fmt.Fprintf(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range r.Models {
		fr, tr := roof(m.ForwardFLOPs, r.GEMMRate), roof(m.TrainFLOPs, r.GEMMRate)
		pf, pt := m.peerSeconds()
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m.Name,
			num(m.ForwardFLOPs/1e9, 1), secs(fr), secs(m.Fast.ForwardS), ratio(m.Fast.ForwardS, fr), ratio(pf, fr),
			num(m.TrainFLOPs/1e9, 1), secs(tr), secs(m.Fast.TrainStepS), ratio(m.Fast.TrainStepS, tr), ratio(pt, tr))
	}

	r.writeDecode(w)
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
		if m.Peer != nil {
			if fair, why := m.Peer.Fair(); !fair {
				fix := "Install libopenblas0-pthread."
				if blascore.GenericIn(m.Peer.BLAS) != "" {
					fix = "OpenBLAS would need OPENBLAS_CORETYPE (SkylakeX or Haswell), and this CPU offers neither kernel set or forcing it did not take effect (see the BLAS note)."
				}
				fmt.Fprintf(w, "\nPyTorch peer for %s is not a fair peer (%s; BLAS %q): no ratio printed. %s\n", m.Name, why, m.Peer.BLAS, fix)
			}
		}
	}
	for _, m := range r.Models {
		writeProfile(w, m.Name+", one forward pass", m.ForwardProfile, m.Fast.ForwardS, 1)
		writeProfile(w, m.Name+", one training step", m.TrainProfile, m.Fast.TrainStepS, 1)
		writeProfile(w, fmt.Sprintf("%s, batch-1 decode of %d tokens through the step graph", m.Name, m.DecodeProfileTokens), m.DecodeProfile, 0, m.DecodeProfileTokens)
	}
}

// writeRounds prints each model's alternated rounds (Options.Rounds > 1)
// and the median and range of the two ratios over them.
func (r *Report) writeRounds(w io.Writer) {
	for _, m := range r.Models {
		if len(m.Rounds) < 2 {
			continue
		}
		fair := m.fairPeer()
		fmt.Fprintf(w, "\n%s in %d alternated rounds (gocpu, then PyTorch; round 1 is the table's):\n\n", m.Name, len(m.Rounds))
		fmt.Fprintf(w, "| round | forward tok/s gocpu | PyTorch | gocpu/PyTorch | train step gocpu | PyTorch | PyTorch/gocpu |\n|---|---:|---:|---:|---:|---:|---:|\n")
		var fwd, train []float64
		times := func(x float64) string { return ratio(x, 1) }
		for i, rd := range m.Rounds {
			fr, tr := "–", "–"
			if fair && rd.PeerForwardTokS > 0 && rd.ForwardTokS > 0 && rd.TrainStepS > 0 {
				fwd, train = append(fwd, rd.ForwardTokS/rd.PeerForwardTokS), append(train, rd.PeerTrainStepS/rd.TrainStepS)
				fr, tr = ratio(rd.ForwardTokS, rd.PeerForwardTokS), ratio(rd.PeerTrainStepS, rd.TrainStepS)
			}
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s |\n", i+1, num(rd.ForwardTokS, 0), num(rd.PeerForwardTokS, 0), fr,
				secs(rd.TrainStepS), secs(rd.PeerTrainStepS), tr)
		}
		if len(fwd) > 0 {
			fmt.Fprintf(w, "| median (range) | | | %s (%s–%s) | | | %s (%s–%s) |\n",
				times(median(fwd)), times(slices.Min(fwd)), times(slices.Max(fwd)),
				times(median(train)), times(slices.Min(train)), times(slices.Max(train)))
		}
	}
}

// fairPeer reports whether the row has a peer that multiplied on a real
// BLAS (PeerFigures.Fair), the condition for printing any ratio to it.
func (m *ModelRow) fairPeer() bool {
	if m.Peer == nil {
		return false
	}
	fair, _ := m.Peer.Fair()
	return fair
}

// peerSeconds returns the fair peer's forward-pass and training-step
// seconds: the medians over the rounds that measured it, else the table's
// figures; zero without a fair peer.
func (m *ModelRow) peerSeconds() (fwd, train float64) {
	if !m.fairPeer() {
		return 0, 0
	}
	tokens := float64(m.Batch * m.SeqLen)
	var fs, ts []float64
	for _, rd := range m.Rounds {
		if rd.PeerForwardTokS > 0 && rd.PeerTrainStepS > 0 {
			fs, ts = append(fs, tokens/rd.PeerForwardTokS), append(ts, rd.PeerTrainStepS)
		}
	}
	if len(fs) == 0 {
		if m.Peer.ForwardTokS > 0 {
			fwd = tokens / m.Peer.ForwardTokS
		}
		return fwd, m.Peer.TrainStepS
	}
	return median(fs), median(ts)
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs is not modified.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// writeDecode prints batch-1 decoding against the streaming bound.
func (r *Report) writeDecode(w io.Writer) {
	fmt.Fprintf(w, "\nBatch-1 decode against the streaming bound (weight bytes per token ÷ the measured read bandwidth, %s GB/s; BF16: weights stored in bfloat16, computing in float32):\n\n", num(r.StreamBps/1e9, 1))
	fmt.Fprintf(w, "| model | MB per token | bound tok/s | decode tok/s gocpu | of bound | BF16 bound tok/s | BF16 weights tok/s | of BF16 bound | BF16 / F32 bound | pure-Go | gocpu/pure-Go |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range r.Models {
		bound, bound16 := 0.0, 0.0
		if m.DecodeBytes > 0 {
			bound, bound16 = r.StreamBps/float64(m.DecodeBytes), 2*r.StreamBps/float64(m.DecodeBytes)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m.Name, num(float64(m.DecodeBytes)/1e6, 1), num(bound, 0),
			num(m.Fast.DecodeTokS, 1), pct(m.Fast.DecodeTokS, bound), num(bound16, 0), num(m.Fast.DecodeBF16TokS, 1),
			pct(m.Fast.DecodeBF16TokS, bound16), ratio(m.Fast.DecodeBF16TokS, bound),
			num(m.Plain.DecodeTokS, 1), ratio(m.Fast.DecodeTokS, m.Plain.DecodeTokS))
	}
	if !(r.StreamCPUBps > 0) {
		return
	}
	// The same in CPU time, which other processes inflate less than wall
	// time on a shared machine.
	fmt.Fprintf(w, "\nIn process CPU time per token (the bound: the weight bytes at the %s GB per CPU-second the same read measured):\n\n", num(r.StreamCPUBps/1e9, 1))
	fmt.Fprintf(w, "| model | bound CPU-ms | F32 CPU-ms | of bound | BF16 CPU-ms | of BF16 bound | BF16 / F32 bound |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range r.Models {
		bound := float64(m.DecodeBytes) / r.StreamCPUBps
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", m.Name, num(bound*1e3, 3),
			num(m.Fast.DecodeCPUs*1e3, 3), pct(bound, m.Fast.DecodeCPUs),
			num(m.Fast.DecodeBF16CPUs*1e3, 3), pct(bound/2, m.Fast.DecodeBF16CPUs), ratio(bound, m.Fast.DecodeBF16CPUs))
	}
}

// Fair reports whether the peer multiplied on a real BLAS: not the netlib
// reference BLAS ("reference:" prefix from peer_env.blas()), and named at
// all (an older peer script that does not say is not trusted).
func (p *PeerFigures) Fair() (bool, string) {
	switch {
	case p.BLAS == "":
		return false, "BLAS not reported"
	case strings.HasPrefix(p.BLAS, "reference"):
		return false, "reference BLAS"
	case blascore.GenericIn(p.BLAS) != "":
		return false, "OpenBLAS runs its " + blascore.GenericIn(p.BLAS) + " (pre-AVX) kernels on this CPU"
	}
	return true, ""
}

// roof is the time of flops at gflops GFLOP/s (0 when unknown).
func roof(flops, gflops float64) float64 {
	if !(flops > 0) || !(gflops > 0) {
		return 0
	}
	return flops / (gflops * 1e9)
}

// writeProfile prints a per-op-kind profile (nothing when empty): time,
// share and calls per op kind, and per token when tokens > 1. unprofiled,
// when known, is the same work's time without profiling.
func writeProfile(w io.Writer, title string, prof []gocpu.OpTime, unprofiled float64, tokens int) {
	if len(prof) == 0 {
		return
	}
	var total time.Duration
	for _, p := range prof {
		total += p.Time
	}
	fmt.Fprintf(w, "\nProfile: %s (gocpu:profile, every delegated op its own segment): %s in ops", title, secs(total.Seconds()))
	if unprofiled > 0 {
		fmt.Fprintf(w, ", %s unprofiled", secs(unprofiled))
	}
	if tokens > 1 {
		fmt.Fprintf(w, ", %.3f ms per token", total.Seconds()*1e3/float64(tokens))
	}
	fmt.Fprintf(w, ":\n\n| op | runs on | calls | time | share |\n|---|---|---:|---:|---:|\n")
	for _, p := range prof {
		op := p.Op
		if p.Size > 0 {
			op = fmt.Sprintf("%s, %d elements", op, p.Size)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s |\n", op, p.Where, p.Calls, msecs(p.Time), pct(p.Time.Seconds(), total.Seconds()))
	}
}

func msecs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds()*1e3, 'f', 2, 64) + " ms"
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
