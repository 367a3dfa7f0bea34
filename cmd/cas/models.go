package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cas-engine/cas/backend"
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
// names, with weights in precision p (empty: f32) and a progress bar on
// stderr. The caller finalizes m.Backend().
func loadQwen(cmd *cobra.Command, modelDir string, p qwen.Precision) (*qwen.Model, error) {
	be, err := backend.New()
	if err != nil {
		return nil, err
	}
	m, err := qwen.Load(modelDir, be, qwen.LoadOptions{Progress: progressOut(cmd.ErrOrStderr()), DType: p})
	if err != nil {
		be.Finalize()
		return nil, err
	}
	return m, nil
}
