package tokenizer_test

import (
	"fmt"

	"github.com/cas-engine/cas/model/tokenizer"
)

func ExampleParse() {
	tok, err := tokenizer.Parse([]byte(`{
	  "added_tokens": [
	    {"id": 1, "content": "[CLS]", "special": true},
	    {"id": 2, "content": "[SEP]", "special": true}],
	  "normalizer": {"type": "BertNormalizer", "lowercase": true},
	  "pre_tokenizer": {"type": "BertPreTokenizer"},
	  "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 1], "sep": ["[SEP]", 2]},
	  "decoder": {"type": "WordPiece", "prefix": "##"},
	  "model": {"type": "WordPiece", "unk_token": "[UNK]",
	    "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "token": 3, "##izer": 4, "!": 5}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	ids := tok.EncodeWithSpecial("Tokenizer!")
	fmt.Println(ids, tok.Decode(ids, true))
	// Output: [1 3 4 5 2] tokenizer!
}

func ExampleRenderChat() {
	off := false
	text, err := tokenizer.RenderChat(
		[]tokenizer.Message{{Role: "user", Content: "Who won?"}},
		tokenizer.ChatOptions{Family: tokenizer.FamilyQwen3, AddGenerationPrompt: true, EnableThinking: &off},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q\n", text)
	// Output: "<|im_start|>user\nWho won?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
}
