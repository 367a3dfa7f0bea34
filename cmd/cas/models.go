package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/cas-engine/cas/backend"
	"github.com/cas-engine/cas/model/bert"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/tokenizer"
)

// loadModelTokenizer loads --tokenizer, by default the tokenizer.json of
// the model folder.
func loadModelTokenizer(modelDir, tokPath string) (*tokenizer.Tokenizer, error) {
	if tokPath == "" {
		tokPath = filepath.Join(modelDir, "tokenizer.json")
	}
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", tokPath, err)
	}
	return tok, nil
}

// loadQwen loads the Qwen folder --model onto the backend $GOMLX_BACKEND
// names, with weights in precision p (empty: f32) and its progress bar on
// progress (nil: none). The caller finalizes m.Backend().
func loadQwen(modelDir string, p qwen.Precision, progress io.Writer) (*qwen.Model, error) {
	be, err := backend.New()
	if err != nil {
		return nil, err
	}
	m, err := qwen.Load(modelDir, be, qwen.LoadOptions{Progress: progress, DType: p})
	if err != nil {
		be.Finalize()
		return nil, err
	}
	return m, nil
}

// loadBERT loads the E5/BERT folder --encoder onto the backend
// $GOMLX_BACKEND names; closeAll closes the encoder, then the backend.
func loadBERT(modelDir string, opts bert.Options) (enc *bert.Encoder, closeAll func(), err error) {
	be, err := backend.New()
	if err != nil {
		return nil, nil, err
	}
	enc, err = bert.LoadWithOptions(modelDir, be, opts)
	if err != nil {
		be.Finalize()
		return nil, nil, err
	}
	return enc, func() { enc.Close(); be.Finalize() }, nil
}
