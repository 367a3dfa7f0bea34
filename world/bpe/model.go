package bpe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// byteChars is GPT-2's reversible byte→character table (bytes_to_unicode):
// the printable bytes '!'..'~', '¡'..'¬', '®'..'ÿ' map to themselves, the
// other 68 bytes, in increasing order, to U+0100, U+0101, ….
var byteChars, charBytes = func() ([256]string, map[rune]byte) {
	var fwd [256]string
	back := make(map[rune]byte, 256)
	n := 0
	for b := range 256 {
		r := rune(b)
		if !(b >= '!' && b <= '~') && !(b >= 0xA1 && b <= 0xAC) && !(b >= 0xAE && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		fwd[b] = string(r)
		back[r] = byte(b)
	}
	return fwd, back
}()

// ByteLevel maps each byte of s to its GPT-2 character.
func ByteLevel(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteString(byteChars[s[i]])
	}
	return b.String()
}

// Model is a trained byte-level BPE tokenizer.
type Model struct {
	// Vocab[id] is the token's byte-level string: ids 0–255 are the bytes,
	// later ids the merge results in order of first appearance.
	Vocab []string
	// Merges[k] is the pair of tokens the k-th merge joins; MergeTo[k] the
	// id of the result (two merges can make the same string: "ab"+"c" and
	// "a"+"bc").
	Merges  [][2]int
	MergeTo []int
	// Added tokens take ids len(Vocab), len(Vocab)+1, ….
	Added []AddedToken

	ids   map[string]int // token string → id (lookups only)
	ranks map[pair]int   // merge pair → rank
}

func newModel(added []AddedToken) *Model {
	m := &Model{ids: map[string]int{}, ranks: map[pair]int{}, Added: added}
	for b := range 256 {
		m.Vocab = append(m.Vocab, byteChars[b])
		m.ids[byteChars[b]] = b
	}
	return m
}

// pairLess orders pairs by their (left, right) token strings.
func (m *Model) pairLess(a, b pair) bool {
	if la, lb := m.Vocab[a[0]], m.Vocab[b[0]]; la != lb {
		return la < lb
	}
	return m.Vocab[a[1]] < m.Vocab[b[1]]
}

// addMerge appends a merge, and its token unless the string is already in
// the vocabulary, returning the token's id.
func (m *Model) addMerge(p pair) int {
	tok := m.Vocab[p[0]] + m.Vocab[p[1]]
	id, ok := m.ids[tok]
	if !ok {
		id = len(m.Vocab)
		m.Vocab = append(m.Vocab, tok)
		m.ids[tok] = id
	}
	m.ranks[p] = len(m.Merges)
	m.Merges = append(m.Merges, [2]int{p[0], p[1]})
	m.MergeTo = append(m.MergeTo, id)
	return id
}

// VocabSize is the number of ids: bytes, merges and added tokens.
func (m *Model) VocabSize() int { return len(m.Vocab) + len(m.Added) }

// TokenID returns the id of a token string (a byte-level vocabulary entry or
// an added token's content).
func (m *Model) TokenID(s string) (int, bool) {
	for k, a := range m.Added {
		if a.Content == s {
			return len(m.Vocab) + k, true
		}
	}
	id, ok := m.ids[s]
	return id, ok
}

// Encode tokenizes text: added tokens first, then GPT-2 word splitting, then
// the merges of each word applied lowest rank first (all occurrences of a
// pair at once, left to right), as GPT-2 and Hugging Face do.
func (m *Model) Encode(text string) []int {
	var out []int
	splitAdded(text, m.Added, func(piece string, tok int) {
		if tok >= 0 {
			out = append(out, len(m.Vocab)+tok)
			return
		}
		SplitWords(piece, func(w string) { out = m.encodeWord(w, out) })
	})
	return out
}

func (m *Model) encodeWord(w string, out []int) []int {
	syms := make([]int, len(w))
	for i := 0; i < len(w); i++ {
		syms[i] = int(w[i])
	}
	for len(syms) > 1 {
		best, bestRank := pair{}, -1
		for i := 0; i+1 < len(syms); i++ {
			p := pair{syms[i], syms[i+1]}
			if r, ok := m.ranks[p]; ok && (bestRank < 0 || r < bestRank) {
				best, bestRank = p, r
			}
		}
		if bestRank < 0 {
			break
		}
		syms = mergePair(syms, best, m.MergeTo[bestRank])
	}
	return append(out, syms...)
}

// Decode maps ids back to text; skipSpecial drops special added tokens.
// Unknown ids are skipped. Bytes that do not form valid UTF-8 decode to
// U+FFFD, as Hugging Face's ByteLevel decoder does.
func (m *Model) Decode(ids []int, skipSpecial bool) string {
	var buf []byte
	for _, id := range ids {
		switch {
		case id >= 0 && id < len(m.Vocab):
			for _, r := range m.Vocab[id] {
				buf = append(buf, charBytes[r])
			}
		case id >= len(m.Vocab) && id < m.VocabSize():
			a := m.Added[id-len(m.Vocab)]
			if !(skipSpecial && a.Special) {
				buf = append(buf, a.Content...)
			}
		}
	}
	if utf8.Valid(buf) {
		return string(buf)
	}
	return strings.ToValidUTF8(string(buf), "\uFFFD")
}

// jsonString marshals s without HTML escaping (so "<think>" stays
// readable).
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// WriteJSON writes the model as a Hugging Face tokenizer.json: no
// normalizer, a ByteLevel pre-tokenizer (use_regex, no prefix space), no
// post-processor, a ByteLevel decoder, the BPE model with its vocab (in id
// order) and merges in rank order ("left right" strings, the form every tokenizers
// version reads), and the added tokens.
func (m *Model) WriteJSON(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	for k, a := range m.Added {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n    {\"id\": %d, \"content\": %s, \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": %t}",
			len(m.Vocab)+k, jsonString(a.Content), a.Special)
	}
	b.WriteString("\n  ],\n  \"normalizer\": null,\n")
	b.WriteString("  \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": true},\n")
	b.WriteString("  \"post_processor\": null,\n")
	b.WriteString("  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, \"use_regex\": true},\n")
	b.WriteString("  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {")
	for id, tok := range m.Vocab {
		if id > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n      %s: %d", jsonString(tok), id)
	}
	b.WriteString("\n    },\n    \"merges\": [")
	for k, p := range m.Merges {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n      %s", jsonString(m.Vocab[p[0]]+" "+m.Vocab[p[1]]))
	}
	b.WriteString("\n    ]\n  }\n}\n")
	_, err := w.Write(b.Bytes())
	return err
}

// ReadJSON reads back a tokenizer.json written by WriteJSON (or any
// byte-level BPE file of the same shape: vocab ids 0–255 the bytes in
// order, later ids the merge results in order of first appearance, added
// tokens right after the vocab).
func ReadJSON(r io.Reader) (*Model, error) {
	var j struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Model struct {
			Type   string          `json:"type"`
			Vocab  map[string]int  `json:"vocab"`
			Merges json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	if err := json.NewDecoder(r).Decode(&j); err != nil {
		return nil, fmt.Errorf("bpe: decode tokenizer.json: %w", err)
	}
	if j.Model.Type != "BPE" {
		return nil, fmt.Errorf("bpe: model.type = %q, want BPE", j.Model.Type)
	}
	var merges [][2]string
	var asStrings []string
	if err := json.Unmarshal(j.Model.Merges, &asStrings); err == nil {
		for k, s := range asStrings {
			l, rgt, ok := strings.Cut(s, " ")
			if !ok || l == "" || rgt == "" || strings.Contains(rgt, " ") {
				return nil, fmt.Errorf("bpe: merges[%d] = %q: want \"left right\"", k, s)
			}
			merges = append(merges, [2]string{l, rgt})
		}
	} else if err := json.Unmarshal(j.Model.Merges, &merges); err != nil {
		return nil, fmt.Errorf("bpe: model.merges: %w", err)
	}
	var added []AddedToken
	for _, a := range j.AddedTokens {
		added = append(added, AddedToken{Content: a.Content, Special: a.Special})
	}
	m := newModel(added)
	for b := range 256 {
		if id, ok := j.Model.Vocab[byteChars[b]]; !ok || id != b {
			return nil, fmt.Errorf("bpe: vocab[%q] = %d, want byte id %d", byteChars[b], id, b)
		}
	}
	for k, mg := range merges {
		l, lok := m.ids[mg[0]]
		rr, rok := m.ids[mg[1]]
		if !lok || !rok {
			return nil, fmt.Errorf("bpe: merges[%d] = %q %q: unknown token", k, mg[0], mg[1])
		}
		if _, dup := m.ranks[pair{l, rr}]; dup {
			return nil, fmt.Errorf("bpe: merges[%d] = %q %q: duplicate merge", k, mg[0], mg[1])
		}
		id := m.addMerge(pair{l, rr})
		if want, ok := j.Model.Vocab[m.Vocab[id]]; !ok || want != id {
			return nil, fmt.Errorf("bpe: merges[%d] makes %q with id %d, vocab says %d", k, m.Vocab[id], id, want)
		}
	}
	if len(j.Model.Vocab) != len(m.Vocab) {
		return nil, fmt.Errorf("bpe: vocab has %d entries, bytes and merges make %d", len(j.Model.Vocab), len(m.Vocab))
	}
	for k, a := range j.AddedTokens {
		if a.ID != len(m.Vocab)+k {
			return nil, fmt.Errorf("bpe: added_tokens[%d] %q has id %d, want %d", k, a.Content, a.ID, len(m.Vocab)+k)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("bpe: added_tokens[%d] has empty content", k)
		}
	}
	return m, nil
}
