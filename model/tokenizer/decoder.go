package tokenizer

import (
	"encoding/json"
	"strings"
)

// decoder turns tokens back into text (Hugging Face's decoders): decodeChain
// maps the token list to a list of strings whose concatenation is the text.
type decoder interface {
	decodeChain(tokens []string) []string
}

type decoderJSON struct {
	Type string `json:"type"`
	// WordPiece
	Prefix  *string `json:"prefix"`
	Cleanup *bool   `json:"cleanup"`
	// BPEDecoder
	Suffix *string `json:"suffix"`
	// Replace
	Pattern *patternJSON `json:"pattern"`
	Content string       `json:"content"`
	// Sequence
	Decoders []json.RawMessage `json:"decoders"`
}

func parseDecoder(raw json.RawMessage, alpha *byteLevelAlphabet) (decoder, error) {
	j, ok, err := decodeComponent[decoderJSON]("decoder", raw)
	if !ok || err != nil {
		return nil, err
	}
	switch j.Type {
	case "ByteLevel":
		return byteLevelDecoder{alpha}, nil
	case "WordPiece":
		d := wordPieceDecoder{prefix: "##", cleanup: boolOr(j.Cleanup, true)}
		if j.Prefix != nil {
			d.prefix = *j.Prefix
		}
		return d, nil
	case "BPEDecoder":
		s := "</w>"
		if j.Suffix != nil {
			s = *j.Suffix
		}
		return bpeSuffixDecoder(s), nil
	case "Fuse":
		return fuseDecoder{}, nil
	case "Replace":
		m, err := componentPattern("decoder Replace", j.Pattern)
		if err != nil {
			return nil, err
		}
		return replaceDecoder{replaceNormalizer{m: m, content: j.Content}}, nil
	case "Sequence":
		return parseSequence[sequenceDecoder]("decoder", j.Decoders, func(r json.RawMessage) (decoder, error) { return parseDecoder(r, alpha) })
	}
	return nil, unsupportedComponent("decoder", j.Type)
}

// byteLevelDecoder maps the alphabet characters of all tokens back to
// bytes and reads them as UTF-8, replacing ill-formed sequences by U+FFFD.
type byteLevelDecoder struct{ alpha *byteLevelAlphabet }

func (d byteLevelDecoder) decodeChain(tokens []string) []string {
	var buf []byte
	for _, t := range tokens {
		buf = d.alpha.decodeToken(buf, t)
	}
	return []string{lossyUTF8(string(buf))}
}

// wordPieceDecoder joins pieces, gluing "##" continuations to the previous
// piece and, with cleanup, undoing BERT's spaces before punctuation and
// contractions.
type wordPieceDecoder struct {
	prefix  string
	cleanup bool
}

func (d wordPieceDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		if i != 0 {
			if strings.HasPrefix(t, d.prefix) {
				t = strings.Replace(t, d.prefix, "", 1)
			} else {
				t = " " + t
			}
		}
		if d.cleanup {
			t = cleanupSpaces(t)
		}
		out[i] = t
	}
	return out
}

// cleanupPairs is Hugging Face's decoder cleanup, applied in its order.
var cleanupPairs = [][2]string{
	{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
	{" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"},
	{" 've", "'ve"}, {" 're", "'re"},
}

func cleanupSpaces(s string) string {
	for _, p := range cleanupPairs {
		s = strings.ReplaceAll(s, p[0], p[1])
	}
	return s
}

// bpeSuffixDecoder replaces the end-of-word suffix by a space (none after
// the last token).
type bpeSuffixDecoder string

func (d bpeSuffixDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		repl := " "
		if i == len(tokens)-1 {
			repl = ""
		}
		out[i] = strings.ReplaceAll(t, string(d), repl)
	}
	return out
}

type fuseDecoder struct{}

func (fuseDecoder) decodeChain(tokens []string) []string {
	return []string{strings.Join(tokens, "")}
}

type replaceDecoder struct{ r replaceNormalizer }

func (d replaceDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = d.r.normalize(t)
	}
	return out
}

type sequenceDecoder []decoder

func (seq sequenceDecoder) decodeChain(tokens []string) []string {
	return chain(seq, tokens, decoder.decodeChain)
}
