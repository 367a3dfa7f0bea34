package tokenizer

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// model turns one pre-tokenized word into ids (Hugging Face's models).
type model interface {
	// tokenize appends the ids of word to dst.
	tokenize(word string, dst []int) []int
	vocab() map[string]int
}

// bpeModel is byte-pair encoding (Sennrich et al., 2016) as Hugging Face's
// BPE model runs it: a word starts as one symbol per character; while some
// adjacent pair (a, b) is in the merges table, the pair of lowest rank — the
// leftmost one among equals — is replaced by the token a+b.
type bpeModel struct {
	vocabMap     map[string]int
	merges       map[uint64]bpeMerge
	unkID        int // -1 when there is no unk token
	prefix       string
	suffix       string
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	// runeID caches the id of every single-character token below
	// len(runeID) (the byte-level alphabet lies there); -1 when absent.
	runeID []int32
	cache  *wordCache
	// rawBytes: words arrive as raw bytes from a ByteLevel pre-tokenizer
	// that skipped its mapping; byteID[b] is the id of b's alphabet
	// character and alpha maps words when the mapped string is needed.
	rawBytes bool
	byteID   [256]int32
	alpha    *byteLevelAlphabet
}

// useRawBytes lets the model read byte-level words unmapped. It needs no
// continuation prefix, suffix or byte fallback, which see characters.
func (m *bpeModel) useRawBytes(alpha *byteLevelAlphabet) bool {
	if m.prefix != "" || m.suffix != "" || m.byteFallback {
		return false
	}
	m.rawBytes, m.alpha = true, alpha
	for b := range m.byteID {
		m.byteID[b] = -1
		if id, ok := m.vocabMap[alpha.byteToStr[b]]; ok {
			m.byteID[b] = int32(id)
		}
	}
	return true
}

type bpeMerge struct {
	rank, id int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

type bpeJSON struct {
	Type                    string   `json:"type"`
	Dropout                 *float64 `json:"dropout"`
	UnkToken                *string  `json:"unk_token"`
	ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
	FuseUnk                 bool     `json:"fuse_unk"`
	ByteFallback            bool     `json:"byte_fallback"`
	IgnoreMerges            bool     `json:"ignore_merges"`
	MaxInputCharsPerWord    *int     `json:"max_input_chars_per_word"`

	// Filled by the scanner, not by encoding/json.
	vocab      map[string]int // nil when absent
	vocabList  bool           // vocab was an array (Unigram)
	merges     [][2]int32     // vocab ids
	haveMerges bool
}

// cacheCapacity is Hugging Face's default BPE word cache size; words of
// cacheMaxWord bytes or more are not cached.
const (
	cacheCapacity = 10000
	cacheMaxWord  = 256
)

// newBPE builds the model; byID is the vocab inverted.
func newBPE(j *bpeJSON, byID []string) (*bpeModel, error) {
	if j.vocab == nil {
		return nil, fmt.Errorf("BPE model has no vocab object")
	}
	if !j.haveMerges {
		return nil, fmt.Errorf("BPE model has no merges table")
	}
	vocab := j.vocab
	m := &bpeModel{
		vocabMap:     vocab,
		unkID:        -1,
		fuseUnk:      j.FuseUnk,
		byteFallback: j.ByteFallback,
		ignoreMerges: j.IgnoreMerges,
		cache:        &wordCache{m: make(map[string][]int, 1024)},
	}
	if j.ContinuingSubwordPrefix != nil {
		m.prefix = *j.ContinuingSubwordPrefix
	}
	if j.EndOfWordSuffix != nil {
		m.suffix = *j.EndOfWordSuffix
	}
	if j.UnkToken != nil {
		id, ok := vocab[*j.UnkToken]
		if !ok {
			return nil, fmt.Errorf("BPE unk_token %q is not in the vocab", *j.UnkToken)
		}
		m.unkID = id
	}
	m.merges = make(map[uint64]bpeMerge, len(j.merges))
	var buf []byte
	for rank, p := range j.merges {
		a, b := byID[p[0]], byID[p[1]]
		if !strings.HasPrefix(b, m.prefix) {
			return nil, fmt.Errorf("merge %d (%q %q): second token lacks the prefix %q", rank, a, b, m.prefix)
		}
		buf = append(append(buf[:0], a...), b[len(m.prefix):]...)
		id, ok := vocab[string(buf)]
		if !ok {
			return nil, fmt.Errorf("merge %d (%q %q): merged token %q not in the vocab", rank, a, b, buf)
		}
		// A repeated pair keeps its last rank, as Hugging Face's HashMap collect.
		m.merges[pairKey(p[0], p[1])] = bpeMerge{rank: int32(rank), id: int32(id)}
	}
	m.runeID = make([]int32, 0x180)
	for r := range m.runeID {
		m.runeID[r] = -1
		if id, ok := vocab[string(rune(r))]; ok {
			m.runeID[r] = int32(id)
		}
	}
	return m, nil
}

func (m *bpeModel) vocab() map[string]int { return m.vocabMap }

func (m *bpeModel) tokenize(word string, dst []int) []int {
	if word == "" {
		return dst
	}
	if m.ignoreMerges {
		mapped := word
		if m.rawBytes {
			mapped = m.alpha.encode(word)
		}
		if id, ok := m.vocabMap[mapped]; ok {
			return append(dst, id)
		}
	}
	cacheable := len(word) < cacheMaxWord
	if cacheable {
		if ids, ok := m.cache.get(word); ok {
			return append(dst, ids...)
		}
	}
	start := len(dst)
	dst = m.mergeWord(word, dst)
	if cacheable {
		m.cache.put(word, dst[start:])
	}
	return dst
}

// bpeSymbol is one symbol of a word being merged, in a linked list over the
// initial characters; size 0 marks a symbol merged into its left neighbour.
type bpeSymbol struct {
	id         int32
	prev, next int32
	size       int32
}

// bpeCandidate is a queued merge of the symbol at pos with its right
// neighbour into id.
type bpeCandidate struct {
	pos, rank, id int32
}

func (m *bpeModel) mergeWord(w string, dst []int) []int {
	var symBuf [32]bpeSymbol
	syms := symBuf[:0]
	add := func(id int32, size int) {
		n := int32(len(syms))
		if n > 0 {
			syms[n-1].next = n
		}
		syms = append(syms, bpeSymbol{id: id, prev: n - 1, next: -1, size: int32(size)})
	}
	unkID, unkSize := int32(-1), 0
	for i := 0; i < len(w); {
		if m.rawBytes {
			// The word is raw bytes; each byte is one alphabet character.
			id := m.byteID[w[i]]
			switch {
			case id >= 0:
				if unkID >= 0 {
					add(unkID, unkSize)
					unkID = -1
				}
				add(id, 1)
			case m.unkID >= 0:
				if unkID >= 0 && m.fuseUnk {
					unkSize++
				} else {
					if unkID >= 0 {
						add(unkID, unkSize)
					}
					unkID, unkSize = int32(m.unkID), 1
				}
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(w[i:])
		isFirst, isLast := i == 0, i+n == len(w)
		id := int32(-1)
		if m.prefix == "" && m.suffix == "" && int(r) < len(m.runeID) && n == utf8.RuneLen(r) {
			id = m.runeID[r]
		} else {
			s := w[i : i+n]
			if !isFirst {
				s = m.prefix + s
			}
			if isLast {
				s += m.suffix
			}
			if v, ok := m.vocabMap[s]; ok {
				id = int32(v)
			} else if m.byteFallback {
				if ids, ok := m.fallbackIDs(s); ok {
					for _, b := range ids {
						add(b, 1)
					}
					i += n
					continue
				}
			}
		}
		switch {
		case id >= 0:
			if unkID >= 0 {
				add(unkID, unkSize)
				unkID = -1
			}
			add(id, n)
		case m.unkID >= 0:
			if unkID >= 0 && m.fuseUnk {
				unkSize += n
			} else {
				if unkID >= 0 {
					add(unkID, unkSize)
				}
				unkID, unkSize = int32(m.unkID), n
			}
		}
		i += n
	}
	if unkID >= 0 {
		add(unkID, unkSize)
	}
	m.mergeAll(syms)
	for _, s := range syms {
		if s.size != 0 {
			dst = append(dst, int(s.id))
		}
	}
	return dst
}

// fallbackIDs maps every byte of s to its <0xXX> token (SentencePiece byte
// fallback); ok is false when one is missing.
func (m *bpeModel) fallbackIDs(s string) ([]int32, bool) {
	ids := make([]int32, 0, len(s))
	for i := 0; i < len(s); i++ {
		id, ok := m.vocabMap[fmt.Sprintf("<0x%02X>", s[i])]
		if !ok {
			return nil, false
		}
		ids = append(ids, int32(id))
	}
	return ids, true
}

// mergeAll applies merges by priority with a min-heap keyed by (rank, pos),
// following Hugging Face's Word::merge_all step for step, including its
// check that a popped candidate still produces the same token.
func (m *bpeModel) mergeAll(syms []bpeSymbol) {
	var heapBuf [32]bpeCandidate
	h := candidateHeap(heapBuf[:0])
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h = h.push(bpeCandidate{pos: int32(i), rank: mg.rank, id: mg.id})
		}
	}
	for len(h) > 0 {
		var top bpeCandidate
		top, h = h.pop()
		cur := &syms[top.pos]
		if cur.size == 0 || cur.next == -1 {
			continue
		}
		nextPos := cur.next
		right := syms[nextPos]
		if mg, ok := m.merges[pairKey(cur.id, right.id)]; !ok || mg.id != top.id {
			continue
		}
		cur.id = top.id
		cur.size += right.size
		cur.next = right.next
		syms[nextPos].size = 0
		if right.next >= 0 && int(right.next) < len(syms) {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if mg, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				h = h.push(bpeCandidate{pos: cur.prev, rank: mg.rank, id: mg.id})
			}
		}
		if cur.next >= 0 && int(cur.next) < len(syms) {
			if mg, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				h = h.push(bpeCandidate{pos: top.pos, rank: mg.rank, id: mg.id})
			}
		}
	}
}

// candidateHeap is a binary min-heap ordered by (rank, pos).
type candidateHeap []bpeCandidate

func (a bpeCandidate) less(b bpeCandidate) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.pos < b.pos
}

func (h candidateHeap) push(c bpeCandidate) candidateHeap {
	s := append(h, c)
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
	return s
}

func (h candidateHeap) pop() (bpeCandidate, candidateHeap) {
	s := h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].less(s[m]) {
			m = l
		}
		if r < len(s) && s[r].less(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	return top, s
}

// wordCache memoises the ids of frequent words. Like Hugging Face's BPE
// cache it stops inserting once full; it is safe for concurrent use.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int
}

func (c *wordCache) get(w string) ([]int, bool) {
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int) {
	c.mu.Lock()
	if len(c.m) < cacheCapacity {
		c.m[w] = append([]int(nil), ids...)
	}
	c.mu.Unlock()
}
