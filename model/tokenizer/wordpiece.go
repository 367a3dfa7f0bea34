package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// wordPieceModel is WordPiece (Schuster & Nakajima, 2012; BERT): a word is
// covered greedily from the left by the longest vocabulary entry, pieces
// after the first carrying the continuation prefix ("##"). A word longer
// than maxChars characters, or one that cannot be covered, becomes the
// single unk token.
type wordPieceModel struct {
	vocabMap map[string]int
	// cont maps a continuation piece without its prefix to its id, so the
	// inner loop looks up substrings without building "##"+piece.
	cont     map[string]int
	prefix   string
	unkID    int
	maxChars int
	// maxLen is the longest entry in bytes (without the prefix): longer
	// candidates cannot match, so the greedy search starts there.
	maxLen int
}

func newWordPiece(j *bpeJSON) (*wordPieceModel, error) {
	if j.vocab == nil {
		return nil, fmt.Errorf("WordPiece model has no vocab object")
	}
	vocab := j.vocab
	m := &wordPieceModel{vocabMap: vocab, prefix: "##", maxChars: 100}
	if j.ContinuingSubwordPrefix != nil {
		m.prefix = *j.ContinuingSubwordPrefix
	}
	if j.MaxInputCharsPerWord != nil {
		m.maxChars = *j.MaxInputCharsPerWord
	}
	unk := "[UNK]"
	if j.UnkToken != nil {
		unk = *j.UnkToken
	}
	id, ok := vocab[unk]
	if !ok {
		return nil, fmt.Errorf("WordPiece unk_token %q is not in the vocab", unk)
	}
	m.unkID = id
	m.cont = make(map[string]int, len(vocab)/4)
	for tok, id := range vocab {
		m.maxLen = max(m.maxLen, len(tok))
		if rest, ok := strings.CutPrefix(tok, m.prefix); ok {
			m.cont[rest] = id
		}
	}
	return m, nil
}

func (m *wordPieceModel) vocab() map[string]int { return m.vocabMap }

func (m *wordPieceModel) tokenize(word string, dst []int) []int {
	if word == "" {
		return dst
	}
	if utf8.RuneCountInString(word) > m.maxChars {
		return append(dst, m.unkID)
	}
	mark := len(dst)
	for start := 0; start < len(word); {
		end := min(len(word), start+m.maxLen)
		for end < len(word) && !utf8.RuneStart(word[end]) {
			end-- // keep candidates on character boundaries
		}
		found := -1
		for start < end {
			var id int
			var ok bool
			if start == 0 {
				id, ok = m.vocabMap[word[:end]]
			} else {
				id, ok = m.cont[word[start:end]]
			}
			if ok {
				found = id
				break
			}
			_, n := utf8.DecodeLastRuneInString(word[start:end])
			end -= n
		}
		if found < 0 {
			return append(dst[:mark], m.unkID)
		}
		dst = append(dst, found)
		start = end
	}
	return dst
}
