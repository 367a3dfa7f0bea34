package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cas-engine/cas/search"
	"github.com/spf13/cobra"
)

// indexImportFlags are the flags of `cas index import`.
type indexImportFlags struct {
	faiss, corpus, out         string
	queryPrefix, passagePrefix string
	dense                      denseFlags
}

func newIndexImportCmd() *cobra.Command {
	var f indexImportFlags
	cmd := &cobra.Command{
		Use:   "import --faiss FILE --corpus JSONL --encoder DIR [--tokenizer FILE] --out DIR",
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
and the eval/train/calibrate retriever settings.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runIndexImport(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.faiss, "faiss", "", "FAISS inner-product index file (e5_Flat.index)")
	fl.StringVar(&f.corpus, "corpus", "", "JSONL corpus, one {\"id\",\"contents\"} passage per line, in the index's row order")
	fl.StringVar(&f.out, "out", "", "index folder to create")
	fl.StringVar(&f.queryPrefix, "query-prefix", search.E5QueryPrefix, "prefix added to every query before encoding")
	fl.StringVar(&f.passagePrefix, "passage-prefix", search.E5PassagePrefix, "prefix the passages were embedded with (recorded)")
	f.dense.register(cmd)
	if fl.Lookup("tokenizer") == nil { // keep --tokenizer if the shared flags name it otherwise
		fl.StringVar(&f.dense.tokenizer, "tokenizer", "", "tokenizer.json of the encoder (default: <encoder>/tokenizer.json)")
	}
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
	start := time.Now()
	// Load the encoder once: a missing model or tokenizer, or a width that
	// differs from the FAISS file's, fails here rather than at serve time.
	enc, release, err := loadE5(f.dense)
	if err != nil {
		return fmt.Errorf("index import: %w", err)
	}
	dim := enc.Dim()
	release()
	tok := f.dense.tokenizer
	if tok == "" {
		tok = filepath.Join(f.dense.encoder, "tokenizer.json")
	}
	s, err := search.ImportFAISSFolder(cmd.Context(), f.faiss, f.corpus, f.out, search.ImportOptions{
		EncoderPath: absPath(f.dense.encoder), TokenizerPath: absPath(tok),
		MaxLength: f.dense.maxLen, EncoderDim: dim,
		QueryPrefix: f.queryPrefix, PassagePrefix: f.passagePrefix,
		NoQueryPrefix: f.queryPrefix == "", NoPassagePrefix: f.passagePrefix == "",
		Progress: cmd.ErrOrStderr(),
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "imported %d passages × %d-d vectors from %s (memory-mapped in place) with corpus %s in %.2fs; wrote %s\n",
		s.Docs, s.Dense.Dim, f.faiss, f.corpus, time.Since(start).Seconds(), f.out)
	return err
}
