package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cas-engine/cas/search"
	"github.com/cas-engine/cas/search/vector"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// `cas index` builds, searches and inspects vector indexes. Each command
// dispatches on its input mode (a raw vector file today); a mode is one
// flag set plus one run function, so more modes (a corpus and an encoder, BM25)
// slot in beside the vector mode.

func newIndexCmd() *cobra.Command {
	return commandGroup("index", "Build, search and inspect vector indexes (Flat, IVF; F32, F16, SQ8; FAISS files read)",
		newIndexBuildCmd(), newIndexSearchCmd(), newIndexInfoCmd(), newIndexImportCmd())
}

// indexBuildFlags are the flags of `cas index build`.
type indexBuildFlags struct {
	vectors, ids, out  string
	dim                int
	flat               bool
	ivf                int
	metric, kmeansInit string
	nprobe, trainSize  int
	storeFlags
}

// storeFlags are the vector-storage and IVF-training flags that index
// build (vector and corpus modes) and index import share.
type storeFlags struct {
	f16, sq8            bool
	iterations, threads int
	seed                uint64
}

// registerKMeans adds --iter, --seed and --threads.
func (s *storeFlags) registerKMeans(fl *pflag.FlagSet) {
	fl.IntVar(&s.iterations, "iter", 10, "IVF: k-means iterations")
	fl.Uint64Var(&s.seed, "seed", 1234, "IVF: k-means seed")
	fl.IntVar(&s.threads, "threads", 0, "goroutines (default: all cores)")
}

// encoding is the storage --f16 or --sq8 chooses (default float32); the
// error for both names the command.
func (s *storeFlags) encoding(command string) (vector.Encoding, error) {
	switch {
	case s.f16 && s.sq8:
		return 0, fmt.Errorf("%s: --f16 and --sq8 exclude each other", command)
	case s.f16:
		return vector.F16, nil
	case s.sq8:
		return vector.SQ8, nil
	}
	return vector.F32, nil
}

func (s *storeFlags) kmeans() vector.KMeansOptions {
	return vector.KMeansOptions{Iterations: s.iterations, Seed: s.seed, Threads: s.threads}
}

func newIndexBuildCmd() *cobra.Command {
	var f indexBuildFlags
	var cf corpusBuildFlags // --corpus modes: index_corpus.go
	cmd := &cobra.Command{
		Use:   "build --vectors F.f32 --dim D [--ids F] (--flat | --ivf NLIST) [--f16 | --sq8] --out DIR",
		Short: "Build a Flat or IVF index from raw float32 vectors and save it to DIR",
		Long: `Build a vector index from a raw little-endian float32 file (n×D values, no
header) and save it to DIR/index.cas (versioned, checksummed, memory-mapped
when opened). --ids gives one id per vector: a .i64/.i32 binary file or text
with one integer per line (default: row numbers). IVF trains its coarse
quantizer by k-means on at most 256·NLIST random vectors (spherical for
inner product). --f16 halves the memory, --sq8 quarters it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := newInterruptible(cmd.Context())
			defer in.stop()
			cmd.SetContext(in.ctx)
			var err error
			switch {
			case cf.corpus != "":
				err = runIndexBuildCorpus(cmd, &f, &cf)
			case f.vectors != "":
				err = runIndexBuildVectors(cmd, &f)
			default:
				return errors.New("index build: give --vectors F.f32 or --corpus F.jsonl")
			}
			if err != nil {
				// Dense builds keep every finished embedding chunk; rerunning
				// the same command continues from there.
				return in.interrupted(err, "the index build", sameCommand())
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.vectors, "vectors", "", "raw float32 vector file (n×dim little-endian values)")
	fl.IntVar(&f.dim, "dim", 0, "vector dimension")
	fl.StringVar(&f.ids, "ids", "", "vector ids: .i64/.i32 binary or text, one per vector (default: row numbers)")
	fl.BoolVar(&f.flat, "flat", false, "exact (flat) index")
	fl.IntVar(&f.ivf, "ivf", 0, "IVF index with this many inverted lists")
	fl.BoolVar(&f.f16, "f16", false, "store vectors as float16 (half the memory)")
	fl.BoolVar(&f.sq8, "sq8", false, "store vectors as 8-bit scalar-quantized codes (a quarter of the memory)")
	fl.StringVar(&f.metric, "metric", "ip", "ip (inner product) or l2")
	fl.IntVar(&f.nprobe, "nprobe", 1, "IVF: default number of lists a search visits")
	fl.StringVar(&f.kmeansInit, "kmeans-init", "random", "IVF: k-means init, random or kmeans++")
	fl.IntVar(&f.trainSize, "train-size", 0, "vectors sampled for training (default 256·nlist for IVF, 65536 for SQ8)")
	f.registerKMeans(fl)
	fl.StringVar(&f.out, "out", "", "output directory")
	cf.register(cmd)
	return cmd
}

// vectorBuildOptions validates the vector-mode flags.
func (f *indexBuildFlags) vectorBuildOptions() (vector.VectorBuildOptions, error) {
	var o vector.VectorBuildOptions
	if f.dim <= 0 {
		return o, errors.New("index build: --dim D is required")
	}
	if f.out == "" {
		return o, errors.New("index build: --out DIR is required")
	}
	if f.flat == (f.ivf > 0) {
		return o, errors.New("index build: give exactly one of --flat and --ivf NLIST")
	}
	enc, err := f.encoding("index build")
	if err != nil {
		return o, err
	}
	m, err := vector.ParseMetric(f.metric)
	if err != nil {
		return o, fmt.Errorf("index build: --metric: %w", err)
	}
	o.Metric, o.NList, o.NProbe, o.TrainSize, o.Encoding = m, f.ivf, f.nprobe, f.trainSize, enc
	o.KMeans = f.kmeans()
	switch f.kmeansInit {
	case "random":
	case "kmeans++":
		o.KMeans.Init = vector.KMeansPlusPlus
	default:
		return o, fmt.Errorf("index build: --kmeans-init %q (want random or kmeans++)", f.kmeansInit)
	}
	return o, nil
}

func runIndexBuildVectors(cmd *cobra.Command, f *indexBuildFlags) error {
	opt, err := f.vectorBuildOptions()
	if err != nil {
		return err
	}
	opt.Progress = progressOut(cmd.ErrOrStderr())
	v, err := vector.OpenVectorFile(f.vectors, f.dim)
	if err != nil {
		return err
	}
	defer v.Close()
	var ids []int64
	if f.ids != "" {
		if ids, err = vector.ReadIDsFile(f.ids); err != nil {
			return err
		}
	}
	start := time.Now()
	ix, err := vector.BuildVectorIndex(v, ids, opt)
	if err != nil {
		return err
	}
	defer ix.Close()
	built := time.Since(start)
	if err := vector.SaveIndex(ix, f.out); err != nil {
		return err
	}
	path := filepath.Join(f.out, "index.cas")
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "built %v in %.2fs; wrote %s (%d bytes)\n", ix, built.Seconds(), path, st.Size())
	return err
}

// indexSearchFlags are the flags of `cas index search`.
type indexSearchFlags struct {
	index, vectors          string
	k, nprobe, threads, dim int
	batch                   int
	skipChecksum            bool
}

func newIndexSearchCmd() *cobra.Command {
	var f indexSearchFlags
	var cf corpusSearchFlags // --query mode: index_corpus.go
	cmd := &cobra.Command{
		Use:   "search --index DIR|FAISSFILE --vectors Q.f32 -k 10",
		Short: "Search an index with raw float32 query vectors; print one JSON line per query",
		Long: `Search a cas index directory or a FAISS index file (IndexFlatIP,
IndexFlatL2, IndexIVFFlat, IndexIDMap) with the queries of a raw float32
file and print {"query": i, "ids": [...], "scores": [...]} per query, best
first (inner products descending, or squared L2 distances ascending); ids
are -1 where fewer than k results exist.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case len(cf.queries) > 0:
				return runIndexSearchQuery(cmd, &f, &cf)
			case f.vectors != "":
				return runIndexSearchVectors(cmd, &f)
			}
			return errors.New("index search: give --vectors Q.f32 or --query TEXT")
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.index, "index", "", "index directory (cas) or FAISS index file")
	fl.StringVar(&f.vectors, "vectors", "", "raw float32 query file")
	fl.IntVarP(&f.k, "k", "k", 10, "results per query")
	fl.IntVar(&f.nprobe, "nprobe", 0, "IVF lists visited per query (default: the index's)")
	fl.IntVar(&f.threads, "threads", 0, "goroutines (default: all cores)")
	fl.IntVar(&f.dim, "dim", 0, "query dimension (default: the index's; checked when given)")
	fl.IntVar(&f.batch, "batch", 1024, "queries per search call")
	fl.BoolVar(&f.skipChecksum, "skip-checksum", false, "do not checksum the vector payload of a cas index when opening it")
	cf.register(cmd)
	return cmd
}

// searchResult is one output line of `cas index search`.
type searchResult struct {
	Query  int       `json:"query"`
	IDs    []int64   `json:"ids"`
	Scores []float32 `json:"scores"`
}

func runIndexSearchVectors(cmd *cobra.Command, f *indexSearchFlags) error {
	if f.index == "" {
		return errors.New("index search: --index is required")
	}
	if f.k <= 0 || f.batch <= 0 {
		return fmt.Errorf("index search: -k %d and --batch %d must be positive", f.k, f.batch)
	}
	ix, err := vector.OpenIndex(f.index, &vector.IndexLoadOptions{SkipPayloadChecksum: f.skipChecksum})
	if err != nil {
		return err
	}
	defer ix.Close()
	if f.dim != 0 && f.dim != ix.Dim() {
		return fmt.Errorf("index search: --dim %d but %s has dimension %d", f.dim, f.index, ix.Dim())
	}
	v, err := vector.OpenVectorFile(f.vectors, ix.Dim())
	if err != nil {
		return err
	}
	defer v.Close()
	return searchVectorFile(cmd.OutOrStdout(), ix, v, f.k, f.batch, &vector.SearchParams{NProbe: f.nprobe, Threads: f.threads})
}

// searchVectorFile searches every query of v in batches and writes JSON
// lines to w.
func searchVectorFile(w io.Writer, ix vector.Index, v *vector.VectorFile, k, batch int, p *vector.SearchParams) error {
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	d := v.Dim()
	q := make([]float32, min(batch, v.Len())*d)
	for lo := 0; lo < v.Len(); lo += batch {
		hi := min(v.Len(), lo+batch)
		if err := v.ReadRows(q[:(hi-lo)*d], lo); err != nil {
			return err
		}
		scores, ids, err := ix.Search(q[:(hi-lo)*d], k, p)
		if err != nil {
			return err
		}
		for i := range hi - lo {
			if err := enc.Encode(searchResult{Query: lo + i, IDs: ids[i*k : (i+1)*k], Scores: scores[i*k : (i+1)*k]}); err != nil {
				return err
			}
		}
	}
	return out.Flush()
}

func newIndexInfoCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "info --index DIR|FAISSFILE",
		Short: "Describe an index (kind, size, metric, encoding, lists) as JSON",
		Long: `Info describes anything cas builds or reads, as JSON: an index folder
(BM25 or dense, from 'index build --corpus'): its kind, passages, the corpus
it records and the one it would open (or why none), BM25 statistics or the
encoder and vector index; a vector index folder ('index build --vectors')
or a FAISS index file: kind, size, metric, encoding and IVF lists.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return errors.New("index info: --index is required")
			}
			e := json.NewEncoder(cmd.OutOrStdout())
			e.SetIndent("", "  ")
			if isIndexFolder(path) {
				info, err := describeFolder(path)
				if err != nil {
					return err
				}
				return e.Encode(info)
			}
			ix, err := vector.OpenIndex(path, nil)
			if err != nil {
				return err
			}
			defer ix.Close()
			return e.Encode(vector.Describe(ix))
		},
	}
	cmd.Flags().StringVar(&path, "index", "", "index directory (cas) or FAISS index file")
	return cmd
}

// isIndexFolder reports whether path is an index folder (it holds
// settings.json), as opposed to a vector index folder or file.
func isIndexFolder(path string) bool {
	_, err := os.Stat(filepath.Join(path, search.SettingsFile))
	return err == nil
}

// folderInfo is `cas index info` of an index folder.
type folderInfo struct {
	Folder   string                `json:"folder"`
	Settings search.FolderSettings `json:"settings"`
	// Corpus is the corpus file the folder opens (CorpusError when none).
	Corpus      string `json:"corpus,omitempty"`
	CorpusError string `json:"corpus_error,omitempty"`
	// BM25 statistics (kind bm25).
	Terms        int     `json:"terms,omitempty"`
	AvgDocLength float32 `json:"avg_doc_length,omitempty"`
	// Vectors describes the vector index (kind dense).
	Vectors *vector.IndexInfo `json:"vectors,omitempty"`
	Bytes   int64             `json:"bytes_on_disk"`
}

// describeFolder reads an index folder's settings and its index files.
func describeFolder(dir string) (folderInfo, error) {
	s, err := search.ReadFolderSettings(dir)
	if err != nil {
		return folderInfo{}, err
	}
	info := folderInfo{Folder: dir, Settings: s}
	paths, err := s.Paths(dir, "")
	if err != nil {
		info.CorpusError = err.Error()
	}
	info.Corpus = paths.Corpus
	switch s.Kind {
	case search.KindBM25:
		if paths.Index == "" {
			return info, err
		}
		ix, err := search.LoadBM25(paths.Index)
		if err != nil {
			return info, err
		}
		info.Terms, info.AvgDocLength = ix.NumTerms(), ix.AvgDocLength()
	case search.KindDense:
		if paths.Vectors == "" {
			return info, err
		}
		ix, err := vector.OpenIndex(paths.Vectors, nil)
		if err != nil {
			return info, err
		}
		d := vector.Describe(ix)
		ix.Close()
		info.Vectors = &d
	}
	err = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			info.Bytes += fi.Size()
		}
		return err
	})
	return info, err
}
