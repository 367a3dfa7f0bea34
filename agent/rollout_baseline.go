package agent

import (
	"fmt"

	"github.com/cas-engine/cas/model/tokenizer"
)

// DirectInstruction is the task of the direct-answer baseline: the paper's
// answer convention without search.
const DirectInstruction = "Answer the given question directly, without searching. " +
	"Provide the answer inside <answer> and </answer>, without detailed illustrations. " +
	"For example, <answer> Beijing </answer>."

// RAGInstruction is the task of the plain-RAG baseline; the information
// block retrieved with the question follows it.
const RAGInstruction = "Answer the given question using the documents retrieved for it below. " +
	"Provide the answer inside <answer> and </answer>, without detailed illustrations. " +
	"For example, <answer> Beijing </answer>."

// baselineMessages builds the chat turns of the direct (info == "") or RAG
// baseline prompt, placed as the agent's prompt is:
//
//	direct: DirectInstruction + "\nQuestion: " + question
//	RAG:    RAGInstruction + "\n" + information block + "\nQuestion: " + question
func baselineMessages(question, info string, p Placement) ([]tokenizer.Message, error) {
	if pyStrip(question) == "" {
		return nil, fmt.Errorf("prompt: empty question")
	}
	user := DirectInstruction + "\nQuestion: " + question
	if info != "" {
		user = RAGInstruction + "\n" + pyStrip(info) + "\nQuestion: " + question
	}
	switch p {
	case PlacementSystemUser:
		return []tokenizer.Message{{Role: "system", Content: QwenSystemPrompt}, {Role: "user", Content: user}}, nil
	case PlacementUserOnly:
		return []tokenizer.Message{{Role: "user", Content: user}}, nil
	}
	return nil, fmt.Errorf("prompt: unknown placement %d", int(p))
}
