package world

import (
	"fmt"

	"github.com/cas-engine/cas/agent"
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

// agentInstruction is the paper's Table 5 prompt (METHOD.md) up to the
// question. The agent package owns the prompt; this copy only makes the
// tokenizer compress it well.
const agentInstruction = "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new information. After reasoning, if you find you lack some knowledge, you can call a search engine by <search>query</search> and it will return the top searched results between <information> and </information>. You can search as many times as you want. If you find no further external knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. For example, <answer> Beijing </answer>.\nQuestion: "

const systemPrompt = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

// promptText renders a question the way the agent will see it, in Qwen's
// chat markup: the system turn, the user turn with the instruction and the
// question, and the generation prompt (Qwen3 with thinking disabled adds an
// empty think block).
func promptText(question string) string {
	return "<|im_start|>system\n" + systemPrompt + "<|im_end|>\n<|im_start|>user\n" +
		agentInstruction + question + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
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
			emit(promptText(q.Question), 1)
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
