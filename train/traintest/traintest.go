// Package traintest builds small, self-contained training fixtures for
// tests and examples of the trainer: a byte-level tokenizer.json whose ids
// fit the 384-token vocabulary of the golden tiny Qwen models, a
// six-passage corpus with its BM25 index folder, a question file and an APS
// calibration report. Everything is written under a caller's folder.
package traintest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/search"
)

// Pieces are the tokenizer's added tokens, ids 256, 257, … in order: chat
// markers, the agent's tags, the prompt's long fixed texts (so a rendered
// prompt is a few dozen tokens, not a thousand bytes) and the corpus' words
// (so a random tiny model writes searches and answers often).
var Pieces = []string{
	"<|im_start|>", "<think>", "</think>", "<search>", "</search>", "<information>", "</information>",
	"<answer>", "</answer>", agent.QwenSystemPrompt, agent.Instruction, "\nQuestion: ",
	"system", "user", "assistant", "Doc ", "(Title: ",
	" Paris", " Berlin", " Rome", " Madrid", " Lisbon", " capital", " France", " Germany", " Italy",
	" Spain", " Portugal", " of", " the", " is", " city", " river", " what",
}

// EOS is the end-of-message token's text; its id is vocab − 1.
const EOS = "<|im_end|>"

// Actions are whole agent actions; TokenizerJSON cycles through them (each
// copy made unique by leading spaces) to fill the ids after Pieces, so that
// a near-uniform random model searches and answers within a few tokens and
// its rewards vary.
var Actions = []string{
	"<think> I should search.</think>",
	"<search> capital of France</search>", "<search> capital of Germany</search>", "<search> river Seine</search>",
	"<answer> Paris</answer>", "<answer> Berlin</answer>", "<answer> Rome</answer>",
	"<answer> Madrid</answer>", "<answer> Lisbon</answer>", "<answer> Seine</answer>",
}

// TokenizerJSON returns a Hugging Face tokenizer.json for a vocabulary of
// vocab ids: the 256 byte symbols of byte-level BPE (no merges), Pieces as
// non-special added tokens from id 256, then Actions cycled up to vocab − 2,
// and EOS as the special id vocab − 1. Chat markers with <think> make it a
// Qwen3-family tokenizer.
func TokenizerJSON(vocab int) ([]byte, error) {
	if vocab < 256+len(Pieces)+1 {
		return nil, fmt.Errorf("traintest: vocabulary %d too small for %d pieces", vocab, len(Pieces))
	}
	alpha := bytesToUnicode()
	v := map[string]int{}
	for b := 0; b < 256; b++ {
		v[alpha[b]] = b
	}
	var adds []tokenizer.AddedToken
	for i := 256; i < vocab; i++ {
		var content string
		special := false
		switch k := i - 256 - len(Pieces); {
		case i == vocab-1:
			content, special = EOS, true
		case k < 0:
			content = Pieces[i-256]
		default:
			content = strings.Repeat(" ", 1+k/len(Actions)) + Actions[k%len(Actions)]
		}
		adds = append(adds, tokenizer.AddedToken{ID: i, Content: content, Special: special})
	}
	doc := map[string]any{
		"version":        "1.0",
		"truncation":     nil,
		"padding":        nil,
		"added_tokens":   adds,
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model":          map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "fuse_unk": false, "byte_fallback": false, "vocab": v, "merges": []string{}},
	}
	return json.MarshalIndent(doc, "", " ")
}

// bytesToUnicode is GPT-2's byte-to-symbol table of byte-level BPE.
func bytesToUnicode() []string {
	out := make([]string, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			out[b] = string(rune(b))
			continue
		}
		out[b] = string(rune(256 + n))
		n++
	}
	return out
}

// Passages is the fixture corpus: wiki-18 format contents ("Title"\ntext).
var Passages = []struct{ ID, Contents string }{
	{"1", "\"Paris\"\nParis is the capital of France, on the river Seine."},
	{"2", "\"Berlin\"\nBerlin is the capital of Germany, on the river Spree."},
	{"3", "\"Rome\"\nRome is the capital of Italy, on the river Tiber."},
	{"4", "\"Madrid\"\nMadrid is the capital of Spain."},
	{"5", "\"Lisbon\"\nLisbon is the capital of Portugal, on the river Tagus."},
	{"6", "\"Lyon\"\nLyon is a city of France on the river Rhone."},
}

// Questions is the fixture question set (FlashRAG JSONL fields).
var Questions = []struct {
	ID, Question string
	Answers      []string
}{
	{"q1", "what is the capital of France?", []string{"Paris"}},
	{"q2", "what is the capital of Germany?", []string{"Berlin"}},
	{"q3", "what is the capital of Italy?", []string{"Rome"}},
	{"q4", "what is the capital of Spain?", []string{"Madrid"}},
	{"q5", "what is the capital of Portugal?", []string{"Lisbon"}},
	{"q6", "which river runs through Paris?", []string{"Seine", "the Seine"}},
}

// Fixture holds the paths Write created.
type Fixture struct {
	Dir       string
	Tokenizer string // tokenizer.json
	Corpus    string // corpus.jsonl
	Questions string // questions.jsonl
	Index     string // BM25 index folder
	QHat      string // APS calibration file (qhat.json, a conformal.Calibration)
}

// Write creates the fixture under dir (created if missing) for a model
// vocabulary of vocab ids. The APS report keeps up to 3 passages with
// temperature 1 (BM25 scores) at q̂ = 0.9, calibrated at α = 0.2.
func Write(dir string, vocab int) (Fixture, error) {
	fx := Fixture{Dir: dir, Tokenizer: filepath.Join(dir, "tokenizer.json"), Corpus: filepath.Join(dir, "corpus.jsonl"),
		Questions: filepath.Join(dir, "questions.jsonl"), Index: filepath.Join(dir, "index"), QHat: filepath.Join(dir, "qhat.json")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fx, err
	}
	tok, err := TokenizerJSON(vocab)
	if err != nil {
		return fx, err
	}
	if err := os.WriteFile(fx.Tokenizer, tok, 0o644); err != nil {
		return fx, err
	}
	var corpus strings.Builder
	for _, p := range Passages {
		b, _ := json.Marshal(map[string]string{"id": p.ID, "contents": p.Contents})
		corpus.Write(append(b, '\n'))
	}
	if err := os.WriteFile(fx.Corpus, []byte(corpus.String()), 0o644); err != nil {
		return fx, err
	}
	var qs strings.Builder
	for _, q := range Questions {
		b, _ := json.Marshal(map[string]any{"id": q.ID, "question": q.Question, "golden_answers": q.Answers})
		qs.Write(append(b, '\n'))
	}
	if err := os.WriteFile(fx.Questions, []byte(qs.String()), 0o644); err != nil {
		return fx, err
	}
	cal := conformal.Calibration{APS: conformal.APS{Temperature: 1, MinDocs: 1, MaxDocs: 3}, Alpha: 0.2, TargetCoverage: 0.8,
		QHat: 0.9, QHatLog: conformal.JSONFloat(conformal.LogScoreFromE(0.9)), CalibCandidates: 3, Candidates: 3}
	if err := cal.Save(fx.QHat); err != nil {
		return fx, err
	}
	if _, err := search.BuildBM25Folder(context.Background(), fx.Corpus, fx.Index, search.DefaultBM25BuildOptions()); err != nil {
		return fx, fmt.Errorf("traintest: BM25 index: %w", err)
	}
	return fx, nil
}
