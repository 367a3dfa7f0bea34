// Package tokenizer loads Hugging Face tokenizer.json files and encodes and
// decodes text with id-for-id parity with Hugging Face's tokenizers library,
// in pure Go.
//
// Supported pipelines:
//   - byte-level BPE (GPT-2, Qwen2/2.5/3, Llama 3): NFC normalizer, the Split
//     pre-tokenizer regex, the ByteLevel byte↔character alphabet, merges given
//     as "a b" strings or ["a","b"] pairs;
//   - WordPiece (BERT, E5): BertNormalizer (clean text, CJK spacing,
//     accent stripping, lowercasing), BertPreTokenizer, "##" continuations,
//     [UNK] and max_input_chars_per_word.
//
// Encoding follows Hugging Face's order: added tokens with normalized=false
// are cut out of the raw text (leftmost-longest match), the remaining text is
// normalized, added tokens with normalized=true are cut out of it, the rest is
// pre-tokenized into words, and the model encodes every word. Encode adds no
// special tokens; EncodeWithSpecial applies the post-processor ([CLS] x [SEP]).
//
// Regexes run through github.com/dlclark/regexp2, a backtracking engine with
// look-around like the Oniguruma engine Hugging Face uses (Go's regexp
// rejects `\s+(?!\S)`); the GPT-2 and Qwen regexes also have hand-written
// scanners, tested against regexp2 on the same inputs, that are several times
// faster.
//
// RenderChat renders conversations with the Qwen3 and Qwen2.5 chat templates
// exactly as apply_chat_template does (tools aside).
package tokenizer
