package bench

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/blascore"
	"github.com/cas-engine/cas/search/vector"
	"github.com/cas-engine/cas/tensor"
)

const peerOutput = `{"gen": "/tmp/x", "n": 100000, "q": 1000, "d": 768, "seed": 7}
{"peer": "faiss 1.7.3", "blas": "openblas-pthread/libopenblas.so.0", "threads": 1, "n": 100000, "d": 768, "index": "flat", "mode": "batch", "queries": 1000, "qps": 16.15}
{"peer": "faiss 1.7.3", "threads": 1, "n": 100000, "d": 768, "index": "flat", "mode": "single", "queries": 200, "qps": 14.2, "ms_per_query": 70.3}
{"peer": "faiss 1.7.3", "threads": 1, "n": 100000, "d": 768, "index": "ivf1024", "train_s": 1309.3, "add_s": 309.5}
{"peer": "faiss 1.7.3", "threads": 1, "n": 100000, "d": 768, "index": "ivf1024", "nprobe": 1, "recall_at_10": 0.0653, "batch_qps": 1458.9, "single_qps": 1444.8}
{"peer": "faiss 1.7.3", "threads": 2, "n": 100000, "d": 768, "index": "ivf1024", "nprobe": 8, "recall_at_10": 0.2594, "batch_qps": 892.0, "single_qps": 547.2}
not json at all
`

func TestParseFAISSPeer(t *testing.T) {
	figs, err := ParseFAISSPeer(strings.NewReader(peerOutput))
	if err != nil {
		t.Fatal(err)
	}
	f1, f2 := figs[1], figs[2]
	if f1 == nil || f2 == nil || len(figs) != 2 {
		t.Fatalf("thread counts: %v", figs)
	}
	if f1.FlatBatchQPS != 16.15 || f1.FlatBatchSize != 1000 || f1.FlatSingleMs != 70.3 || f1.TrainS != 1309.3 || f1.AddS != 309.5 {
		t.Fatalf("threads 1: %+v", f1)
	}
	if p := f1.IVF[1]; p.Recall != 0.0653 || p.BatchQPS != 1458.9 || p.SingleQPS != 1444.8 {
		t.Fatalf("nprobe 1: %+v", p)
	}
	if p := f2.IVF[8]; p.Recall != 0.2594 {
		t.Fatalf("threads 2 nprobe 8: %+v", p)
	}
	if _, err := ParseFAISSPeer(strings.NewReader(`{"peer": 5}`)); err == nil {
		t.Fatal("bad JSON accepted")
	}
}

func FuzzParseFAISSPeer(f *testing.F) {
	f.Add(peerOutput)
	f.Add(`{"peer":"x","threads":1,"index":"ivf","train_s":null}`)
	f.Fuzz(func(t *testing.T, s string) {
		figs, err := ParseFAISSPeer(strings.NewReader(s))
		if err == nil {
			for th, fg := range figs {
				if fg == nil || fg.Threads != th {
					t.Fatalf("figures under %d: %+v", th, fg)
				}
			}
		}
	})
}

// writeBenchData writes a small faiss_peer.py-style data set.
func writeBenchData(t *testing.T, n, nq, d int) string {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	mk := func(m int) []float32 {
		x := make([]float32, m*d)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		tensor.L2Normalize(x, d)
		return x
	}
	base, q := mk(n), mk(nq)
	if err := vector.WriteVectorFile(filepath.Join(dir, "base.f32"), base); err != nil {
		t.Fatal(err)
	}
	vector.WriteVectorFile(filepath.Join(dir, "query.f32"), q)
	f, _ := vector.NewFlat(d, vector.InnerProduct, vector.F32)
	f.Add(nil, base)
	_, ids, _ := f.Search(q, 10, nil)
	var gt []byte
	for _, id := range ids {
		gt = binary.LittleEndian.AppendUint32(gt, uint32(id))
	}
	os.WriteFile(filepath.Join(dir, "gt_top10.i32"), gt, 0o644)
	return dir
}

func TestRunIndexSmall(t *testing.T) {
	dir := writeBenchData(t, 3000, 40, 16)
	peer := filepath.Join(dir, "peer.jsonl")
	os.WriteFile(peer, []byte(peerOutput), 0o644)
	rep, err := RunIndex(IndexOptions{DataDir: dir, Dim: 16, NList: 16, NProbes: []int{1, 16}, Threads: []int{1, 2}, SingleQueries: 10, FAISSJSON: peer})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 || rep.N != 3000 || rep.Q != 40 {
		t.Fatalf("report: %+v", rep)
	}
	for _, run := range rep.Runs {
		if run.FlatRecall != 1 {
			t.Errorf("threads %d: flat recall %v", run.Threads, run.FlatRecall)
		}
		if run.IVF[1].NProbe != 16 || run.IVF[1].Recall != 1 {
			t.Errorf("threads %d: nprobe=nlist recall %+v", run.Threads, run.IVF[1])
		}
		if run.IVF[0].Recall > run.IVF[1].Recall || run.FlatSingleMs <= 0 || run.BandwidthGBs <= 0 || run.IVFTrainS <= 0 || run.GEMMGFLOPs <= 0 {
			t.Errorf("threads %d: %+v", run.Threads, run)
		}
	}
	if rep.Runs[0].FAISS == nil || rep.Runs[0].FAISS.FlatSingleMs != 70.3 {
		t.Fatalf("FAISS figures not attached: %+v", rep.Runs[0].FAISS)
	}
	var b bytes.Buffer
	rep.WriteMarkdown(&b)
	// Without saved figures the peer must run: a python without faiss is
	// an error that says how to install it.
	_, err = RunIndex(IndexOptions{DataDir: dir, Dim: 16, NList: 16, Threads: []int{1}, FAISSScript: peer, Python: filepath.Join(dir, "no-python")})
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y python3-faiss") {
		t.Errorf("no peer: %v", err)
	}
	_, err = RunIndex(IndexOptions{DataDir: dir, Dim: 16, NList: 16, Threads: []int{1}, FAISSScript: filepath.Join(dir, "missing.py")})
	if err == nil || !strings.Contains(err.Error(), "missing.py") {
		t.Errorf("missing peer script: %v", err)
	}
	for _, want := range []string{"#### Flat, F32, 1 thread(s)", "#### IVF16, F32, 2 thread(s)", "| 16 | 1.000 |", "70.30",
		"Peer at 1 thread(s): faiss 1.7.3, BLAS openblas-pthread/libopenblas.so.0, 1 thread(s).", "vs GEMM roofline"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

func TestMemoryCheckSmall(t *testing.T) {
	m, err := MemoryCheck(20000, 32)
	if err != nil {
		t.Fatal(err)
	}
	if m.IndexBytes != 20000*32*2 || m.PeakRSSBytes < m.IndexBytes || m.RecallSelfCheck != 1 {
		t.Fatalf("%+v", m)
	}
	var b bytes.Buffer
	m.WriteMarkdown(&b)
	if !strings.Contains(b.String(), "F16 flat, 20000 × 32") {
		t.Fatalf("%s", b.String())
	}
}

// TestIndexReportRatiosOnlyAgainstFairPeer: speed-ups are printed against
// a peer whose OpenBLAS runs proper kernels (detected or forced by
// blascore), never against one on the pre-AVX fallback.
func TestIndexReportRatiosOnlyAgainstFairPeer(t *testing.T) {
	const lib = "openblas-pthread/libopenblasp-r0.3.21.so"
	for _, tc := range []struct {
		blas  string
		ratio bool
	}{
		{lib, true},
		{lib + blascore.ForcedMarker + "SkylakeX (OpenBLAS detected Prescott …)", true},
		{lib + blascore.Marker + "Prescott (pre-AVX kernels: OpenBLAS does not recognise this CPU)", false},
		{"reference:blas/libblas.so.3", false},
	} {
		rep := &IndexReport{N: 1000, D: 8, Q: 10, K: 10, NList: 4, Runs: []*ThreadRun{{
			Threads: 1, FlatBatchAllQPS: 200, FlatSingleMs: 1, StreamMs: 1, IVFTrainS: 1,
			FAISS: &FAISSFigures{Peer: "faiss 1.7.3", BLAS: tc.blas, Threads: 1, FlatBatchQPS: 100, FlatSingleMs: 2, TrainS: 3, IVF: map[int]FAISSIVF{}},
		}}}
		var b bytes.Buffer
		rep.WriteMarkdown(&b)
		text := b.String()
		if got := strings.Contains(text, "| 2.00× |"); got != tc.ratio {
			t.Errorf("BLAS %q: speed-up printed %v, want %v:\n%s", tc.blas, got, tc.ratio, text)
		}
		if got := strings.Contains(text, "3.00×"); got != tc.ratio {
			t.Errorf("BLAS %q: training ratio printed %v, want %v", tc.blas, got, tc.ratio)
		}
		if !strings.Contains(text, tc.blas) {
			t.Errorf("report does not show the peer's BLAS %q", tc.blas)
		}
	}
}
