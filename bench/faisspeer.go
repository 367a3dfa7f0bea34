package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"

	"github.com/cas-engine/cas/internal/blascore"
	"github.com/cas-engine/cas/internal/jsonl"
)

// DefaultPython runs the peers (faiss_peer.py, torch_qwen_peer.py) unless
// told otherwise: the system interpreter, where python3-faiss and
// python3-torch are installed.
const DefaultPython = "/usr/bin/python3"

// PeerDefaults fills an empty python with DefaultPython and a nil log with
// io.Discard: the defaults of every benchmark that runs a peer.
func PeerDefaults(python *string, log *io.Writer) {
	if *python == "" {
		*python = DefaultPython
	}
	if *log == nil {
		*log = io.Discard
	}
}

// FAISSFigures are the measurements shared/bench/faiss_peer.py prints for
// one thread count.
type FAISSFigures struct {
	Peer          string
	BLAS          string // the BLAS the peer loaded (peer_env.blas(); "reference:…" is the slow netlib one)
	Threads       int
	FlatBatchQPS  float64 // batch of all queries
	FlatBatchSize int
	FlatSingleMs  float64
	TrainS, AddS  float64
	IVF           map[int]FAISSIVF // by nprobe
}

// FAISSIVF is one nprobe row of faiss_peer.py.
type FAISSIVF struct {
	Recall, BatchQPS, SingleQPS float64
}

type faissLine struct {
	Peer       string   `json:"peer"`
	BLAS       string   `json:"blas"`
	Threads    int      `json:"threads"`
	Index      string   `json:"index"`
	Mode       string   `json:"mode"`
	Queries    int      `json:"queries"`
	QPS        float64  `json:"qps"`
	MsPerQuery float64  `json:"ms_per_query"`
	TrainS     *float64 `json:"train_s"`
	AddS       float64  `json:"add_s"`
	NProbe     int      `json:"nprobe"`
	Recall     float64  `json:"recall_at_10"`
	BatchQPS   float64  `json:"batch_qps"`
	SingleQPS  float64  `json:"single_qps"`
}

// ParseFAISSPeer reads faiss_peer.py's JSON lines (possibly for several
// thread counts, possibly mixed with other output) into figures keyed by
// thread count.
func ParseFAISSPeer(r io.Reader) (map[int]*FAISSFigures, error) {
	out := map[int]*FAISSFigures{}
	err := jsonl.Each(r, func(line int, b []byte) error {
		if b[0] != '{' {
			return nil
		}
		var l faissLine
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("faiss peer output line %d: %w", line, err)
		}
		if l.Peer == "" {
			return nil // the gen line
		}
		f := out[l.Threads]
		if f == nil {
			f = &FAISSFigures{Peer: l.Peer, BLAS: l.BLAS, Threads: l.Threads, IVF: map[int]FAISSIVF{}}
			out[l.Threads] = f
		}
		switch {
		case l.Index == "flat" && l.Mode == "batch":
			f.FlatBatchQPS, f.FlatBatchSize = l.QPS, l.Queries
		case l.Index == "flat" && l.Mode == "single":
			f.FlatSingleMs = l.MsPerQuery
		case strings.HasPrefix(l.Index, "ivf") && l.TrainS != nil:
			f.TrainS, f.AddS = *l.TrainS, l.AddS
		case strings.HasPrefix(l.Index, "ivf") && l.NProbe > 0:
			f.IVF[l.NProbe] = FAISSIVF{Recall: l.Recall, BatchQPS: l.BatchQPS, SingleQPS: l.SingleQPS}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FAISSAvailable reports whether python has the faiss module.
func FAISSAvailable(python string) bool {
	return exec.Command(python, "-c", "import faiss, numpy").Run() == nil
}

// RunFAISSPeer runs `faiss_peer.py run DIR --threads T --nlist N --nprobe
// P` and parses its output; stderr goes to log.
func RunFAISSPeer(python, script, dir string, threads, nlist int, nprobes []int, log io.Writer) (*FAISSFigures, error) {
	ps := make([]string, len(nprobes))
	for i, p := range nprobes {
		ps[i] = strconv.Itoa(p)
	}
	// A peer on OpenBLAS's pre-AVX fallback runs with the kernel set the
	// CPU supports forced (blascore.Prepare); its BLAS says so.
	setup := blascore.Prepare(python, blascore.HostFeatures())
	defer setup.Close()
	cmd := exec.Command(python, script, "run", dir, "--threads", strconv.Itoa(threads),
		"--nlist", strconv.Itoa(nlist), "--nprobe", strings.Join(ps, ","))
	cmd.Env = setup.Env()
	cmd.Stderr = log
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("run %s: %w", script, err)
	}
	figs, err := ParseFAISSPeer(&out)
	if err != nil {
		return nil, err
	}
	f := figs[threads]
	if f == nil {
		return nil, fmt.Errorf("%s printed no figures for %d threads", script, threads)
	}
	f.BLAS = setup.Describe(f.BLAS)
	return f, nil
}

// ReadFAISSPeerFile parses a saved faiss_peer.py output file.
func ReadFAISSPeerFile(path string) (map[int]*FAISSFigures, error) {
	return jsonl.ReadFile(path, ParseFAISSPeer)
}
