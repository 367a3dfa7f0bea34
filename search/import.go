package search

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cas-engine/cas/internal/relpath"
	"github.com/cas-engine/cas/search/vector"
)

// Importing Search-R1's published retrieval assets: wiki-18.jsonl (one
// {"id","contents"} passage per line) and e5_Flat.index (a FAISS
// IndexFlatIP of the E5 passage vectors, row i = line i of the corpus,
// 21M × 768 float32 ≈ 65 GB). Re-embedding 21M passages on a CPU takes
// weeks, so an import does not touch the vectors: the index folder records
// the FAISS file's path, and opening the folder memory-maps the file in
// place (OpenIndex), so the 65 GB are never copied or read into the heap.
// The folder is an ordinary dense folder (FolderSettings kind "dense") whose
// dense.vector_index is the FAISS file's absolute path (relative when the
// file lies inside the folder), by the one path rule of internal/relpath.

// ImportOptions configure ImportFAISSFolder.
type ImportOptions struct {
	// EncoderPath and TokenizerPath are recorded in settings.json: the E5
	// encoder that embeds queries (and embedded the passages).
	EncoderPath   string
	TokenizerPath string
	// MaxLength is the encoder's maximum query length (0: its default).
	MaxLength int
	// EncoderDim > 0 is checked against the FAISS file's dimension.
	EncoderDim int
	// QueryPrefix and PassagePrefix default to E5's "query: " and
	// "passage: " (Search-R1's retriever). An explicit empty prefix is
	// recorded with NoQueryPrefix / NoPassagePrefix.
	QueryPrefix, PassagePrefix     string
	NoQueryPrefix, NoPassagePrefix bool
	Progress                       io.Writer // progress bars (nil: silent)

	// Conversion while importing (vector.Convert): Encoding F16 or SQ8,
	// or NList > 0 lists of an IVF index (NProbe lists searched by
	// default), re-encode the vectors of a flat FAISS file into
	// dir/vectors; the zero values keep the FAISS file in place. TrainSize
	// caps the training sample (SQ8: 65,536; IVF: 256·NList vectors).
	Encoding  vector.Encoding
	NList     int
	NProbe    int
	TrainSize int
	KMeans    vector.KMeansOptions
	Chunk     int // vectors per streamed chunk (default 16,384)
	// PQ > 0 (with NList) makes the IVF an IVF-PQ of PQ bytes per vector
	// (vector.IVFPQ); Rerank > 0 re-scores that many ADC candidates per
	// query exactly from the FAISS file, which the folder then keeps
	// reading (memory-mapped) for the re-rank.
	PQ     int
	Rerank int
}

func (o ImportOptions) converts() bool { return o.Encoding != vector.F32 || o.NList > 0 }

// ImportFAISSFolder makes dir an index folder over the FAISS index file
// faissPath (inner product: IndexFlatIP, or an IndexIDMap/IndexIVFFlat whose
// ids are corpus rows) and the JSONL corpus corpusPath, aligned by line: the
// file's vector count must equal the corpus's passage count (its non-blank
// lines), else the error names both counts and both files. It writes only the
// corpus offsets table and settings.json (last); on any error it removes what
// it wrote, so dir never holds a half-made folder.
func ImportFAISSFolder(ctx context.Context, faissPath, corpusPath, dir string, opt ImportOptions) (FolderSettings, error) {
	absFAISS, err := filepath.Abs(faissPath)
	if err != nil {
		return FolderSettings{}, err
	}
	absCorpus, err := filepath.Abs(corpusPath)
	if err != nil {
		return FolderSettings{}, err
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return FolderSettings{}, err
	}
	st, err := os.Stat(absFAISS)
	if err != nil {
		return FolderSettings{}, fmt.Errorf("import: FAISS file: %w", err)
	}
	if st.IsDir() {
		return FolderSettings{}, fmt.Errorf("import: %s is a folder; give the FAISS index file (e.g. e5_Flat.index)", faissPath)
	}
	ix, err := vector.OpenIndex(absFAISS, nil)
	if err != nil {
		return FolderSettings{}, fmt.Errorf("import: %w", err)
	}
	defer ix.Close()
	n, d := ix.Len(), ix.Dim()
	if err := vector.CheckImportable(ix, faissPath, opt.EncoderDim); err != nil {
		return FolderSettings{}, err
	}
	switch {
	case opt.PQ > 0 && opt.NList <= 0:
		return FolderSettings{}, errors.New("import: --pq needs --ivf NLIST (IVF-PQ)")
	case opt.PQ > 0 && opt.Encoding != vector.F32:
		return FolderSettings{}, errors.New("import: --pq codes the vectors itself; drop --f16/--sq8")
	case opt.Rerank > 0 && opt.PQ <= 0:
		return FolderSettings{}, errors.New("import: --rerank re-ranks IVF-PQ candidates; give --ivf NLIST --pq M")
	case opt.PQ > 0 && d%opt.PQ != 0:
		return FolderSettings{}, fmt.Errorf("import: --pq %d must divide the dimension %d (bytes per vector, d/M components each)", opt.PQ, d)
	}
	src, isFlat := ix.(*vector.Flat)
	if opt.converts() && (!isFlat || src.Encoding() != vector.F32) {
		return FolderSettings{}, fmt.Errorf("import: %s is not a flat float32 index; only IndexFlatIP files can be converted (--f16, --sq8, --ivf)", faissPath)
	}
	if _, err := os.Stat(filepath.Join(absDir, SettingsFile)); err == nil {
		return FolderSettings{}, fmt.Errorf("import: %s is already an index folder (it has %s); remove it or choose another --out", dir, SettingsFile)
	}
	// Only a new or empty folder: a failed import then removes exactly
	// what it wrote.
	if entries, err := os.ReadDir(absDir); err == nil && len(entries) > 0 {
		return FolderSettings{}, fmt.Errorf("import: %s is not empty; give a new or empty folder as --out", dir)
	}
	created := false
	if _, err := os.Stat(absDir); errors.Is(err, os.ErrNotExist) {
		created = true
	}
	if err := os.MkdirAll(absDir, 0o755); err != nil {
		return FolderSettings{}, fmt.Errorf("import: create index folder: %w", err)
	}
	offsets := filepath.Join(absDir, OffsetsFile)
	vectors := filepath.Join(absDir, VectorsDir)
	cleanup := func() {
		os.Remove(offsets)
		os.RemoveAll(vectors)
		if created {
			os.Remove(absDir)
		}
	}
	rows, err := alignCorpus(absCorpus, offsets, faissPath, corpusPath, n, opt.Progress)
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("import interrupted (nothing kept; rerun the same command): %w", ctx.Err())
	}
	if err != nil {
		cleanup()
		return FolderSettings{}, err
	}
	// The one path rule (internal/relpath): a file inside the folder is
	// recorded relative to it, anything else (the FAISS file imported in
	// place, the corpus, the encoder) absolute.
	var rec [4]string
	for i, p := range []string{absFAISS, absCorpus, opt.EncoderPath, opt.TokenizerPath} {
		if rec[i], err = relpath.Store(absDir, "", p); err != nil {
			cleanup()
			return FolderSettings{}, fmt.Errorf("import: %w", err)
		}
	}
	rel := rec[0]
	if opt.converts() {
		if err := os.MkdirAll(vectors, 0o755); err != nil {
			cleanup()
			return FolderSettings{}, fmt.Errorf("import: %w", err)
		}
		spec := vector.ConvertOptions{Encoding: opt.Encoding, NList: opt.NList, NProbe: opt.NProbe, TrainSize: opt.TrainSize,
			KMeans: opt.KMeans, Chunk: opt.Chunk, Progress: opt.Progress, Release: vector.ReleaseMapped, PQ: opt.PQ, Rerank: opt.Rerank}
		if opt.Rerank > 0 {
			spec.RefinePath = absFAISS
		}
		if err := vector.Convert(ctx, src, filepath.Join(vectors, vector.FileName), spec); err != nil {
			cleanup()
			if ctx.Err() != nil {
				return FolderSettings{}, fmt.Errorf("import interrupted while converting %s (nothing kept; rerun the same command to start over): %w", faissPath, err)
			}
			return FolderSettings{}, fmt.Errorf("import: convert %s: %w", faissPath, err)
		}
		rel = VectorsDir
	}
	s := FolderSettings{
		Kind: KindDense, Corpus: rec[1], Offsets: OffsetsFile, Docs: rows,
		Dense: &DenseSettings{
			Encoder: rec[2], Tokenizer: rec[3],
			QueryPrefix: prefixOr(opt.QueryPrefix, opt.NoQueryPrefix, E5QueryPrefix), PassagePrefix: prefixOr(opt.PassagePrefix, opt.NoPassagePrefix, E5PassagePrefix),
			Dim: d, VectorIndex: rel, MaxLength: opt.MaxLength,
		},
	}
	if err := WriteFolderSettings(absDir, s); err != nil {
		cleanup()
		return FolderSettings{}, fmt.Errorf("import: %w", err)
	}
	return s, nil
}

func prefixOr(p string, none bool, def string) string {
	if p == "" && !none {
		return def
	}
	return p
}

// alignCorpus builds the corpus offsets table at offsetsPath and checks that
// the corpus has exactly vectors passages, one per non-blank line.
func alignCorpus(corpusPath, offsetsPath, faissName, corpusName string, vectors int, progress io.Writer) (int, error) {
	c, err := BuildCorpusOffsets(corpusPath, offsetsPath, progress)
	if err != nil {
		return 0, fmt.Errorf("import: %w", err)
	}
	rows := c.Len()
	c.Close()
	if rows != vectors {
		return 0, fmt.Errorf("import: FAISS file %s holds %d vectors but corpus %s has %d passages (non-blank lines); vector i must be the passage on line i, so the counts must be equal",
			faissName, vectors, corpusName, rows)
	}
	return rows, nil
}
