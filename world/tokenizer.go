package world

import (
	"fmt"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/world/bpe"
)

// AddedTokens returns the tokenizer's added tokens, in id order after the
// learned vocabulary: Qwen's chat control tokens (special) and the agent's
// tags (not special: they survive decoding with special tokens skipped, as
// Qwen3's <think> does).
func AddedTokens() []bpe.AddedToken {
	return []bpe.AddedToken{
		{Content: "<|endoftext|>", Special: true},
		{Content: "<|im_start|>", Special: true},
		{Content: "<|im_end|>", Special: true},
		{Content: "<think>"}, {Content: "</think>"},
		{Content: "<search>"}, {Content: "</search>"},
		{Content: "<information>"}, {Content: "</information>"},
		{Content: "<answer>"}, {Content: "</answer>"},
	}
}

// promptText renders a question the way the agent will see it
// (agent.ChatPrompt: the system turn, the user turn with the paper's
// instruction and the question, and Qwen3's generation prompt with thinking
// disabled), so that the tokenizer compresses the real prompt.
func promptText(question string) (string, error) {
	return agent.ChatPrompt(tokenizer.FamilyQwen3, agent.PlacementSystemUser, question)
}

// distractorsPerSearch is how many non-gold passages an information block
// is assumed to hold when weighting the corpus for tokenizer training.
const distractorsPerSearch = 3

// TrainingText calls emit with the tokenizer's training text and a weight,
// shaped like the byte stream the model will see: for every question of
// every split its prompt and its scripted trajectory with the gold passages
// as retrieval results, and every passage's contents weighted by how often a
// passage shows up as a distractor (distractorsPerSearch per search, spread
// over the corpus).
func (w *World) TrainingText(emit func(text string, weight int)) error {
	searches := 0
	for s := range NumSplits {
		for _, q := range w.Splits[s] {
			searches += q.Hops
		}
	}
	weight := max(1, (distractorsPerSearch*searches+len(w.Passages)/2)/max(1, len(w.Passages)))
	byID := make(map[string]Passage, len(w.Passages))
	for _, p := range w.Passages {
		emit(p.Contents(), weight)
		byID[p.ID] = p
	}
	for s := range NumSplits {
		for _, q := range w.Splits[s] {
			prompt, err := promptText(q.Question)
			if err != nil {
				return fmt.Errorf("question %s: %w", q.ID, err)
			}
			emit(prompt, 1)
			hop := 0
			t, err := Script(q, func(string) []Passage {
				var docs []Passage
				if hop < len(q.GoldIDs) {
					for _, id := range q.GoldIDs[hop] {
						docs = append(docs, byID[id])
					}
				}
				hop++
				return docs
			}, agent.InfoCode)
			if err != nil {
				return err
			}
			emit(t.Text()+"<|im_end|>", 1)
		}
	}
	return nil
}

// TrainTokenizer learns a byte-level BPE on TrainingText with
// Config.VocabSize entries in all (bytes, merges and AddedTokens()).
func (w *World) TrainTokenizer() (*bpe.Model, error) {
	tr := bpe.NewTrainer(AddedTokens())
	if err := w.TrainingText(tr.Add); err != nil {
		return nil, fmt.Errorf("tokenizer training text: %w", err)
	}
	m, err := tr.Train(w.Config.VocabSize, w.Config.MinMergeFrequency)
	if err != nil {
		return nil, fmt.Errorf("train tokenizer: %w", err)
	}
	return m, nil
}
