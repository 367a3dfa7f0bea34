package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cas-engine/cas/search"
	"github.com/cas-engine/cas/search/vector"
	"github.com/spf13/cobra"
)

// indexImportFlags are the flags of `cas index import`.
type indexImportFlags struct {
	faiss, corpus, out         string
	queryPrefix, passagePrefix string
	dense                      denseFlags
	ivf, nprobe, trainSize     int
	pq, rerank                 int
	storeFlags
}

func newIndexImportCmd() *cobra.Command {
	var f indexImportFlags
	cmd := &cobra.Command{
		Use:   "import --faiss FILE --corpus JSONL --encoder DIR [--encoder-tokenizer FILE] --out DIR",
		Short: "Make an index folder over Search-R1's FAISS index file and corpus, in place",
		Long: `Import Search-R1's published retrieval assets without re-embedding: a FAISS
inner-product index file (e5_Flat.index, an IndexFlatIP of the E5 passage
vectors; IndexIDMap and IndexIVFFlat whose ids are corpus rows also work) and
its JSONL corpus (wiki-18.jsonl), aligned by line: vector i is the passage on
line i, and the vector count must equal the corpus's passage count.

DIR receives the corpus offsets table and settings.json, which records the
FAISS file's path (relative to DIR), the corpus, the encoder and its E5
prefixes ("query: " / "passage: "; --query-prefix and --passage-prefix
override them, "" for none). The FAISS file is memory-mapped in place when
the folder is opened, never copied. The folder then works wherever an index
folder does: cas index search --index DIR --query TEXT, cas serve --index DIR,
and the eval/train/calibrate retriever settings.

--f16 (half the memory), --sq8 (a quarter) and --ivf NLIST (an IVF index,
with --sq8 residual codes as FAISS's IndexIVFScalarQuantizer) instead
re-encode the vectors into DIR/vectors while importing, streamed chunk by
chunk from the memory-mapped file straight into the output file, so memory
stays bounded (one chunk, the training sample and, for IVF, 4 bytes per
vector); the FAISS file is then no longer needed by the folder.

--ivf NLIST --pq M makes an IVF-PQ index (FAISS's IndexIVFPQ layout: the
residual of each vector to its list centroid in M bytes, M dividing the
dimension; E5's 768: 48, 64, 96, …), M bytes per passage instead of 4·d;
--rerank R re-scores each query's best R candidates exactly from the FAISS
file, which the folder keeps referring to (only the candidates' rows are
read, by pread, so the server's resident memory is the codes, not the file).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runIndexImport(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.faiss, "faiss", "", "FAISS inner-product index file (e5_Flat.index)")
	fl.StringVar(&f.corpus, "corpus", "", "JSONL corpus, one {\"id\",\"contents\"} passage per line, in the index's row order")
	fl.StringVar(&f.out, "out", "", "index folder to create")
	fl.StringVar(&f.queryPrefix, "query-prefix", search.E5QueryPrefix, "prefix added to every query before encoding")
	fl.StringVar(&f.passagePrefix, "passage-prefix", search.E5PassagePrefix, "prefix the passages were embedded with (recorded)")
	fl.BoolVar(&f.f16, "f16", false, "convert the vectors to float16 (half the memory)")
	fl.BoolVar(&f.sq8, "sq8", false, "convert the vectors to 8-bit scalar-quantized codes (a quarter of the memory)")
	fl.IntVar(&f.ivf, "ivf", 0, "convert to an IVF index with this many lists (combine with --sq8 or --f16)")
	fl.IntVar(&f.pq, "pq", 0, "IVF-PQ: product-quantize with this many sub-quantizers (bytes per vector; with --ivf)")
	fl.IntVar(&f.rerank, "rerank", 0, fmt.Sprintf("IVF-PQ: re-score this many candidates per query exactly from the FAISS file (with --pq default %d; 0: none)", vector.DefaultPQRerank))
	fl.IntVar(&f.nprobe, "nprobe", 1, fmt.Sprintf("IVF: lists a search visits by default (with --pq default %d)", vector.DefaultPQNProbe))
	fl.IntVar(&f.trainSize, "train-size", 0, "vectors sampled for training (default 256·nlist for IVF, max(256·nlist, 65536) for IVF-PQ, 65536 for SQ8)")
	f.registerKMeans(fl)
	f.dense.register(cmd) // --encoder, --encoder-tokenizer (old name --tokenizer), --encoder-max-len
	return cmd
}

func runIndexImport(cmd *cobra.Command, f *indexImportFlags) error {
	switch {
	case f.faiss == "":
		return errors.New("index import: --faiss FILE is required")
	case f.corpus == "":
		return errors.New("index import: --corpus JSONL is required")
	case f.out == "":
		return errors.New("index import: --out DIR is required")
	case f.dense.encoder == "":
		return errors.New("index import: --encoder DIR is required (the E5 encoder that embedded the passages)")
	}
	if f.pq > 0 {
		// IVF-PQ's measured defaults (vector.DefaultPQNProbe, DefaultPQRerank)
		// unless the flags say otherwise: nprobe 1 and no re-rank would
		// serve wiki-18 at a fraction of exact search's recall.
		if !cmd.Flags().Changed("nprobe") {
			f.nprobe = vector.DefaultPQNProbe
		}
		if !cmd.Flags().Changed("rerank") {
			f.rerank = vector.DefaultPQRerank
		}
	}
	enc, err := f.encoding("index import")
	if err != nil {
		return err
	}
	if f.ivf < 0 || f.trainSize < 0 || f.pq < 0 || f.rerank < 0 {
		return fmt.Errorf("index import: --ivf %d, --pq %d, --rerank %d and --train-size %d must not be negative", f.ivf, f.pq, f.rerank, f.trainSize)
	}
	start := time.Now()
	// Load the encoder once: a missing model or tokenizer, or a width that
	// differs from the FAISS file's, fails here rather than at serve time.
	e5, release, err := loadE5(f.dense)
	if err != nil {
		return fmt.Errorf("index import: %w", err)
	}
	dim := e5.Dim()
	release()
	tok := f.dense.tokenizer
	if tok == "" {
		tok = filepath.Join(f.dense.encoder, "tokenizer.json")
	}
	// SIGINT/SIGTERM stop a conversion between chunks; the import then
	// removes what it wrote and exits non-zero.
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := search.ImportFAISSFolder(ctx, f.faiss, f.corpus, f.out, search.ImportOptions{
		EncoderPath: absPath(f.dense.encoder), TokenizerPath: absPath(tok),
		MaxLength: f.dense.maxLen, EncoderDim: dim,
		QueryPrefix: f.queryPrefix, PassagePrefix: f.passagePrefix,
		NoQueryPrefix: f.queryPrefix == "", NoPassagePrefix: f.passagePrefix == "",
		Progress: progressOut(cmd.ErrOrStderr()),
		Encoding: enc, NList: f.ivf, NProbe: f.nprobe, TrainSize: f.trainSize, PQ: f.pq, Rerank: f.rerank,
		KMeans: f.kmeans(),
	})
	if err != nil {
		return err
	}
	how := "memory-mapped in place"
	if s.Dense.VectorIndex == search.VectorsDir {
		how = "converted to " + enc.String()
		if f.ivf > 0 {
			how = fmt.Sprintf("converted to IVF%d-%v", f.ivf, enc)
		}
		if f.pq > 0 {
			how = fmt.Sprintf("converted to IVF%d-PQ%d", f.ivf, f.pq)
			if f.rerank > 0 {
				how += fmt.Sprintf(", re-ranking %d from the FAISS file", f.rerank)
			}
		}
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "imported %d passages × %d-d vectors from %s (%s) with corpus %s in %.2fs; wrote %s\n",
		s.Docs, s.Dense.Dim, f.faiss, how, f.corpus, time.Since(start).Seconds(), f.out)
	return err
}
