package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/search"
	"github.com/cas-engine/cas/world"
)

// promptPieces are the fixed texts of the rollout prompts, added to the
// demo's tokenizer as single (non-special) tokens: the system turn, the
// agent's instruction and the direct-answer baseline's instruction, each up
// to the question. A rendered prompt is then about 25 tokens instead of
// 160, which the 2-core budget needs; the text the model reads, and its
// decoding, are unchanged (traintest does the same for the trainer's
// fixtures).
var promptPieces = []string{
	agent.QwenSystemPrompt,
	agent.Instruction + "\nQuestion: ",
	agent.DirectInstruction + "\nQuestion: ",
}

// worldData is stage 1's result: the world, the demo's tokenizer and the
// BM25 retriever over the corpus.
type worldData struct {
	w         *world.World
	dir       string // the world's files (corpus, splits, world tokenizer)
	tokPath   string // the demo's tokenizer.json (world tokenizer + prompt pieces)
	tok       *tokenizer.Tokenizer
	eos       int
	indexDir  string
	retriever search.ClosableRetriever
	byID      map[string]world.Passage
}

func (d *worldData) close() error {
	if d.retriever != nil {
		return d.retriever.Close()
	}
	return nil
}

// splitPath is the JSONL file of a split.
func (d *worldData) splitPath(s world.Split) string { return filepath.Join(d.dir, world.SplitFile(s)) }

// buildWorld generates the world (always, in memory: it is deterministic and
// takes about a second), writes its files, the demo tokenizer and the BM25
// index unless an earlier run completed them, and opens the retriever.
func (r *runner) buildWorld(ctx context.Context) (*worldData, error) {
	w, err := world.Generate(r.cfg.World)
	if err != nil {
		return nil, fmt.Errorf("world: %w", err)
	}
	d := &worldData{w: w, dir: filepath.Join(r.out, "world"), tokPath: filepath.Join(r.out, tokenizerFile),
		indexDir: filepath.Join(r.out, "index"), byID: make(map[string]world.Passage, len(w.Passages))}
	for _, p := range w.Passages {
		d.byID[p.ID] = p
	}
	err = r.stage(ctx, "world", func() error {
		r.logf("stage 1: world (seed %d): %d entities, %d passages, %d/%d/%d/%d/%d questions (train/aps_calib/aci_calib/test/grpo)",
			r.cfg.World.Seed, len(w.Entities), len(w.Passages), len(w.Splits[world.Train]), len(w.Splits[world.APSCalib]),
			len(w.Splits[world.ACICalib]), len(w.Splits[world.Test]), len(w.Splits[world.GRPO]))
		bm, err := w.TrainTokenizer()
		if err != nil {
			return fmt.Errorf("world tokenizer: %w", err)
		}
		if err := os.RemoveAll(d.dir); err != nil {
			return err
		}
		if err := w.WriteDir(d.dir, bm); err != nil {
			return err
		}
		raw, err := os.ReadFile(filepath.Join(d.dir, world.TokenizerFile))
		if err != nil {
			return err
		}
		aug, err := addPromptPieces(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(d.dir, world.TokenizerFile), err)
		}
		return writeFile(d.tokPath, aug)
	})
	if err != nil {
		return nil, err
	}
	if d.tok, err = tokenizer.Load(d.tokPath); err != nil {
		return nil, fmt.Errorf("load %s: %w", d.tokPath, err)
	}
	eos, ok := d.tok.TokenID("<|im_end|>")
	if !ok {
		return nil, fmt.Errorf("%s has no <|im_end|> token", d.tokPath)
	}
	d.eos = eos
	err = r.stage(ctx, "index", func() error {
		r.logf("stage 1: BM25 index of %d passages", len(w.Passages))
		if err := os.RemoveAll(d.indexDir); err != nil {
			return err
		}
		opt := search.DefaultBM25BuildOptions()
		opt.Progress = r.opts.Progress
		_, err := search.BuildBM25Folder(ctx, filepath.Join(d.dir, world.CorpusFile), d.indexDir, opt)
		return err
	})
	if err != nil {
		return nil, err
	}
	if d.retriever, _, err = search.OpenRetriever(d.indexDir, search.OpenOptions{}); err != nil {
		return nil, fmt.Errorf("open index %s: %w", d.indexDir, err)
	}
	return d, nil
}

// addPromptPieces appends promptPieces to a Hugging Face tokenizer.json as
// added tokens (ids after the largest one), leaving everything else as is.
func addPromptPieces(raw []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	var added []map[string]any
	if err := json.Unmarshal(doc["added_tokens"], &added); err != nil {
		return nil, fmt.Errorf("added_tokens: %w", err)
	}
	var model struct {
		Vocab map[string]int `json:"vocab"`
	}
	if err := json.Unmarshal(doc["model"], &model); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	next := -1
	for _, id := range model.Vocab {
		next = max(next, id)
	}
	for _, a := range added {
		id, ok := a["id"].(float64)
		if !ok {
			return nil, errors.New("added token without an id")
		}
		next = max(next, int(id))
	}
	next++
	for _, p := range promptPieces {
		added = append(added, map[string]any{"id": next, "content": p, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": false})
		next++
	}
	b, err := json.Marshal(added)
	if err != nil {
		return nil, err
	}
	doc["added_tokens"] = b
	return json.MarshalIndent(doc, "", " ")
}
