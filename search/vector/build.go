package vector

import (
	"fmt"
	"io"
	"slices"

	"github.com/cas-engine/cas/internal/meter"
)

// VectorBuildOptions configure BuildVectorIndex.
type VectorBuildOptions struct {
	// NList > 0 builds an IVF index with that many lists; 0 a flat index.
	NList int
	// Metric and Encoding of the index.
	Metric   Metric
	Encoding Encoding
	// NProbe is the IVF index's default nprobe (≤ 0: 1).
	NProbe int
	// KMeans trains the IVF coarse quantizer (Seed, Iterations, Init,
	// Threads); see IVFOptions.
	KMeans KMeansOptions
	// TrainSize caps the vectors read for training (IVF: 256·nlist by
	// default, FAISS's cap; SQ8 flat: 65,536).
	TrainSize int
	// Progress, when non-nil, receives progress bars.
	Progress io.Writer
}

// TrainSize is the number of vectors sampled to train an index: size when
// positive, else FAISS's cap of 256 per list for an IVF index with nlist
// lists, else 65,536 (an SQ8 flat index's value ranges).
func TrainSize(size, nlist int) int {
	switch {
	case size > 0:
		return size
	case nlist > 0:
		return 256 * nlist
	}
	return 1 << 16
}

// BuildVectorIndex builds a Flat or IVF index from a raw float32 vector
// file, reading it in chunks so that the file may exceed memory: an F16
// flat index of n vectors holds 2·n·d bytes plus one chunk. Training reads
// a random sample of rows. ids (nil: row numbers) must have one id per
// vector.
func BuildVectorIndex(v *VectorFile, ids []int64, opt VectorBuildOptions) (Index, error) {
	n, d := v.Len(), v.Dim()
	if ids != nil && len(ids) != n {
		return nil, fmt.Errorf("build index: %d ids for %d vectors in %s", len(ids), n, v.Path())
	}
	if n == 0 {
		return nil, fmt.Errorf("build index: %s holds no vectors", v.Path())
	}
	var ix Index
	if opt.NList > 0 {
		ivf, err := NewIVF(d, opt.NList, IVFOptions{Metric: opt.Metric, Encoding: opt.Encoding, NProbe: opt.NProbe, KMeans: opt.KMeans, Progress: opt.Progress})
		if err != nil {
			return nil, err
		}
		ix = ivf
	} else {
		f, err := NewFlat(d, opt.Metric, opt.Encoding)
		if err != nil {
			return nil, err
		}
		f.Reserve(n)
		ix = f
	}
	if !ix.IsTrained() {
		m := min(TrainSize(opt.TrainSize, opt.NList), n)
		sample, err := readSample(v, m, opt.KMeans.Seed)
		if err != nil {
			return nil, err
		}
		if err := ix.Train(sample); err != nil {
			return nil, fmt.Errorf("build index from %s: %w", v.Path(), err)
		}
	}
	const chunk = 16384
	buf := make([]float32, min(chunk, n)*d)
	bar := meter.NewCount(opt.Progress, int64(n), "add vectors")
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		x := buf[:(hi-lo)*d]
		if err := v.ReadRows(x, lo); err != nil {
			return nil, err
		}
		var cid []int64
		if ids != nil {
			cid = ids[lo:hi]
		}
		if err := ix.Add(cid, x); err != nil {
			return nil, fmt.Errorf("build index from %s: rows %d…%d: %w", v.Path(), lo, hi-1, err)
		}
		bar.Add(hi - lo)
	}
	bar.Finish()
	return ix, nil
}

// readSample reads m random rows of v (all of them when m = Len), in file
// order, merging runs of consecutive rows into one read.
func readSample(v *VectorFile, m int, seed uint64) ([]float32, error) {
	n, d := v.Len(), v.Dim()
	x := make([]float32, m*d)
	if m == n {
		return x, v.ReadRows(x, 0)
	}
	pos := samplePositions(n, m, newRand(seed+2))
	slices.Sort(pos)
	for i := 0; i < m; {
		j := i + 1
		for j < m && pos[j] == pos[j-1]+1 {
			j++
		}
		if err := v.ReadRows(x[i*d:j*d], pos[i]); err != nil {
			return nil, err
		}
		i = j
	}
	return x, nil
}
