package tokenizer

import (
	"encoding/json"
	"unicode"
	"unicode/utf8"
)

// AddedToken is an entry of tokenizer.json's added_tokens: a token matched
// verbatim in the input before pre-tokenization (special tokens such as
// <|im_start|> and [CLS], and added tags such as <think>).
type AddedToken struct {
	ID      int    `json:"id"`
	Content string `json:"content"`
	// SingleWord: match only when not inside a word.
	SingleWord bool `json:"single_word"`
	// LStrip, RStrip: also swallow the whitespace on that side.
	LStrip bool `json:"lstrip"`
	RStrip bool `json:"rstrip"`
	// Normalized: match against the normalized text rather than the raw one.
	Normalized bool `json:"normalized"`
	// Special: dropped by Decode when skipping special tokens.
	Special bool `json:"special"`
}

// UnmarshalJSON reads an added_tokens entry; a missing "normalized" takes
// Hugging Face's default, true for ordinary tokens and false for special ones.
func (a *AddedToken) UnmarshalJSON(data []byte) error {
	type plain AddedToken
	var j struct {
		plain
		Normalized *bool `json:"normalized"`
	}
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*a = AddedToken(j.plain)
	a.Normalized = boolOr(j.Normalized, !a.Special)
	return nil
}

// addedMatcher finds added tokens in text the way Hugging Face's
// AddedVocabulary does: an Aho-Corasick search with leftmost-longest
// semantics, then the single_word, lstrip and rstrip rules.
type addedMatcher struct {
	root  *trieNode
	first [256]bool
}

type trieNode struct {
	next  map[byte]*trieNode
	token *AddedToken // token ending here, if any
}

// newAddedMatcher indexes tokens under the given patterns (their content,
// or its normalized form).
func newAddedMatcher(tokens []*AddedToken, patterns []string) *addedMatcher {
	m := &addedMatcher{root: &trieNode{}}
	for k, tok := range tokens {
		p := patterns[k]
		if p == "" {
			continue
		}
		m.first[p[0]] = true
		n := m.root
		for i := 0; i < len(p); i++ {
			if n.next == nil {
				n.next = make(map[byte]*trieNode)
			}
			c := n.next[p[i]]
			if c == nil {
				c = &trieNode{}
				n.next[p[i]] = c
			}
			n = c
		}
		if n.token == nil {
			n.token = tok
		}
	}
	return m
}

// longestAt returns the longest pattern starting at byte i, or (nil, 0).
func (m *addedMatcher) longestAt(s string, i int) (*AddedToken, int) {
	var best *AddedToken
	bestEnd := 0
	n := m.root
	for j := i; j < len(s); j++ {
		n = n.next[s[j]]
		if n == nil {
			break
		}
		if n.token != nil {
			best, bestEnd = n.token, j+1
		}
	}
	return best, bestEnd
}

// split calls fn on the pieces of s in order: text between tokens with
// tok nil (never empty), and each token match with its span.
func (m *addedMatcher) split(s string, fn func(piece string, tok *AddedToken)) {
	if m == nil || m.root.next == nil {
		if s != "" {
			fn(s, nil)
		}
		return
	}
	last := 0 // end of the previous match (Hugging Face's start_offset)
	for i := 0; i < len(s); {
		if !m.first[s[i]] {
			i++
			continue
		}
		tok, end := m.longestAt(s, i)
		if tok == nil {
			i++
			continue
		}
		start, stop := i, end
		i = end // the search resumes after the match even when it is discarded
		if tok.SingleWord {
			startOK := start == 0 || !endsWithWord(s[:start])
			stopOK := stop == len(s) || !startsWithWord(s[stop:])
			if !startOK || !stopOK {
				continue
			}
		}
		if tok.LStrip {
			ns := start
			for ns > 0 {
				r, n := utf8.DecodeLastRuneInString(s[:ns])
				if !unicode.IsSpace(r) {
					break
				}
				ns -= n
			}
			start = max(ns, last)
		}
		if tok.RStrip {
			for stop < len(s) {
				r, n := utf8.DecodeRuneInString(s[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += n
			}
			i = stop
		}
		if last < start {
			fn(s[last:start], nil)
		}
		fn(s[start:stop], tok)
		last = stop
	}
	if last < len(s) {
		fn(s[last:], nil)
	}
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return isWordRune(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordRune(r)
}
