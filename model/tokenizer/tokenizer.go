package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// Tokenizer is a Hugging Face tokenizer.json loaded in Go. It is immutable
// after Load and safe for concurrent use.
type Tokenizer struct {
	normalizer normalizer
	preTok     preTokenizer
	model      model
	decoder    decoder
	post       postProcessor

	added       []*AddedToken
	addedByID   map[int]*AddedToken
	addedByText map[string]*AddedToken
	rawAdded    *addedMatcher // tokens with normalized=false, on raw text
	normAdded   *addedMatcher // tokens with normalized=true, on normalized text
	idToToken   []string      // model vocab, by id ("" where absent)
	vocabSize   int
	family      string

	limits  Limits
	lastErr atomic.Pointer[error] // first regex timeout of an Encode (see Err)
}

// fileJSON is the top level of tokenizer.json, less the model.
type fileJSON struct {
	AddedTokens   []AddedToken
	Normalizer    json.RawMessage
	PreTokenizer  json.RawMessage
	PostProcessor json.RawMessage
	Decoder       json.RawMessage
}

// scanFile splits a tokenizer.json into its parts in one strict pass: the
// model's vocab and merges are read by jsonScanner, everything else (small)
// by encoding/json.
func scanFile(data []byte) (*fileJSON, *bpeJSON, error) {
	f := &fileJSON{}
	var mj *bpeJSON
	s := &jsonScanner{data: data}
	err := s.object(func(key string) error {
		if key == "model" {
			var err error
			mj, err = scanModel(s)
			return err
		}
		raw, err := s.raw()
		if err != nil {
			return err
		}
		switch key {
		case "added_tokens":
			if !isNull(raw) {
				if err := json.Unmarshal(raw, &f.AddedTokens); err != nil {
					return fmt.Errorf("added_tokens: %w", err)
				}
			}
		case "normalizer":
			f.Normalizer = raw
		case "pre_tokenizer":
			f.PreTokenizer = raw
		case "post_processor":
			f.PostProcessor = raw
		case "decoder":
			f.Decoder = raw
		}
		return nil
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return nil, nil, err
	}
	if mj == nil {
		return nil, nil, fmt.Errorf("no model")
	}
	return f, mj, nil
}

// scanModel reads the model object: vocab and merges directly, the other
// (small) fields through encoding/json.
func scanModel(s *jsonScanner) (*bpeJSON, error) {
	if s.peek() != '{' {
		return nil, s.errorf("model is not an object")
	}
	mj := &bpeJSON{}
	small := []byte{'{'}
	mergesAt := -1
	err := s.object(func(key string) error {
		switch {
		case key == "vocab" && s.peek() == '{':
			v, err := s.vocabObject(len(s.data) / 80)
			mj.vocab = v
			return err
		case key == "merges" && s.peek() == '[':
			if mj.vocab == nil { // merges first: read them once vocab is known
				s.ws()
				var err error
				mergesAt = s.pos
				_, err = s.raw()
				return err
			}
			m, err := s.mergesArray(mj.vocab, len(s.data)/80)
			mj.merges, mj.haveMerges = m, true
			return err
		}
		raw, err := s.raw()
		if err != nil {
			return err
		}
		switch key {
		case "vocab":
			mj.vocabList = !isNull(raw)
		case "merges":
			if !isNull(raw) {
				return fmt.Errorf("model: merges is not an array")
			}
		default:
			if len(small) > 1 {
				small = append(small, ',')
			}
			small = strconv.AppendQuote(small, key)
			small = append(small, ':')
			small = append(small, raw...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if mergesAt >= 0 && mj.vocab != nil {
		ms := &jsonScanner{data: s.data, pos: mergesAt}
		m, err := ms.mergesArray(mj.vocab, 0)
		if err != nil {
			return nil, err
		}
		mj.merges, mj.haveMerges = m, true
	}
	small = append(small, '}')
	if err := json.Unmarshal(small, mj); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return mj, nil
}

// configJSON is the part of tokenizer_config.json the tokenizer uses.
type configJSON struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// Load reads a Hugging Face tokenizer. path is a tokenizer.json file or a
// folder holding one; a tokenizer_config.json (or chat_template.jinja) next
// to it, when present, selects the chat template family (see
// ChatOptions.Family); otherwise the added tokens do.
func Load(path string) (*Tokenizer, error) {
	return LoadWith(path, DefaultLimits())
}

// LoadWith is Load with explicit limits.
func LoadWith(path string, lim Limits) (*Tokenizer, error) {
	file, dir := path, filepath.Dir(path)
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file, dir = filepath.Join(path, "tokenizer.json"), path
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	t, err := ParseWith(data, lim)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", file, err)
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	cfg, err := os.ReadFile(cfgPath)
	switch {
	case err == nil:
		fam, err := familyFromConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", cfgPath, err)
		}
		if fam != "" {
			t.family = fam
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("load %s: %w", cfgPath, err)
	}
	// Newer checkpoints keep the template in chat_template.jinja.
	jinjaPath := filepath.Join(dir, "chat_template.jinja")
	if tmpl, err := os.ReadFile(jinjaPath); err == nil {
		if fam := familyFromTemplate(string(tmpl)); fam != "" {
			t.family = fam
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load %s: %w", jinjaPath, err)
	}
	return t, nil
}

// Parse builds a tokenizer from the bytes of a tokenizer.json. The chat
// family is guessed from the added tokens (Load also reads
// tokenizer_config.json).
func Parse(data []byte) (*Tokenizer, error) {
	return ParseWith(data, DefaultLimits())
}

// Limits bound what a tokenizer.json may ask of memory and time; Hugging
// Face has none, so a hostile file could otherwise cost gigabytes.
type Limits struct {
	// MaxTokenBytes is the longest vocabulary or added token accepted at
	// load (added tokens are indexed in a byte trie: a 100 MB token would
	// cost > 10 GB). Default 4096 bytes; Qwen's longest token is 256 bytes.
	MaxTokenBytes int
	// MaxWordBytes: a pre-tokenized word longer than this is handed to the
	// model (BPE merges, WordPiece) in consecutive pieces of at most this
	// many bytes, cut at character boundaries, so that time and memory stay
	// linear in the text (a 50 MB word cost 32 s and 4.9 GB whole). Hugging
	// Face merges such a word whole; ids can differ at the cuts. Default
	// 65,536 bytes; 0 means no limit.
	MaxWordBytes int
}

// DefaultLimits returns the limits Load and Parse use.
func DefaultLimits() Limits { return Limits{MaxTokenBytes: 4096, MaxWordBytes: 1 << 16} }

// ParseWith is Parse with explicit limits.
func ParseWith(data []byte, lim Limits) (t *Tokenizer, err error) {
	// Normalizing added tokens runs the normalizer's regexes.
	defer recoverRegexTimeout(&err)
	return parse(data, lim)
}

// recoverRegexTimeout turns a matcher's *RegexTimeoutError panic into *err;
// other panics continue.
func recoverRegexTimeout(err *error) {
	if p := recover(); p != nil {
		te, ok := p.(*RegexTimeoutError)
		if !ok {
			panic(p)
		}
		*err = te
	}
}

func parse(data []byte, lim Limits) (*Tokenizer, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("invalid UTF-8 at byte %d", invalidUTF8At(data))
	}
	f, mj, err := scanFile(data)
	if err != nil {
		return nil, err
	}
	typ := mj.Type
	if typ == "" && mj.haveMerges {
		typ = "BPE" // files from before the type tag
	}
	t := &Tokenizer{limits: lim}
	if lim.MaxTokenBytes > 0 {
		for tok := range mj.vocab {
			if len(tok) > lim.MaxTokenBytes {
				return nil, fmt.Errorf("model: vocabulary token %.40q… is %d bytes, over the %d-byte limit (tokenizer.Limits.MaxTokenBytes)", tok, len(tok), lim.MaxTokenBytes)
			}
		}
		for k, a := range f.AddedTokens {
			if len(a.Content) > lim.MaxTokenBytes {
				return nil, fmt.Errorf("added_tokens[%d] (id %d) is %d bytes, over the %d-byte limit (tokenizer.Limits.MaxTokenBytes)", k, a.ID, len(a.Content), lim.MaxTokenBytes)
			}
		}
	}
	if mj.vocab != nil {
		if t.idToToken, err = vocabByID(mj.vocab); err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
	}
	switch typ {
	case "BPE":
		t.model, err = newBPE(mj, t.idToToken)
	case "WordPiece":
		t.model, err = newWordPiece(mj)
	case "":
		err = fmt.Errorf("model has no type")
	default:
		err = fmt.Errorf("unsupported model type %q (supported: BPE, WordPiece)", typ)
	}
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	alpha := newByteLevelAlphabet()
	if t.normalizer, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if t.preTok, err = parsePreTokenizer(f.PreTokenizer, alpha); err != nil {
		return nil, err
	}
	if bl := finalByteLevel(t.preTok); bl != nil {
		if bpe, ok := t.model.(*bpeModel); ok && bpe.useRawBytes(alpha) {
			bl.rawBytes = true
		}
	}
	if t.decoder, err = parseDecoder(f.Decoder, alpha); err != nil {
		return nil, err
	}
	if t.post, err = parsePostProcessor(f.PostProcessor); err != nil {
		return nil, err
	}
	if err := t.setVocab(f.AddedTokens); err != nil {
		return nil, err
	}
	t.family = familyFromTokens(t)
	return t, nil
}

// setVocab indexes the model vocabulary and the added tokens.
func (t *Tokenizer) setVocab(added []AddedToken) error {
	vocab := t.model.vocab()
	t.addedByID = make(map[int]*AddedToken, len(added))
	t.addedByText = make(map[string]*AddedToken, len(added))
	distinct := len(vocab)
	for k := range added {
		a := &added[k]
		if a.Content == "" {
			return fmt.Errorf("added_tokens[%d]: empty content", k)
		}
		if a.ID < 0 {
			return fmt.Errorf("added_tokens[%d] %q: negative id %d", k, a.Content, a.ID)
		}
		if id, ok := vocab[a.Content]; ok && id != a.ID {
			return fmt.Errorf("added_tokens[%d] %q: id %d, but the model vocab has it as %d", k, a.Content, a.ID, id)
		}
		if prev, ok := t.addedByText[a.Content]; ok && prev.ID != a.ID {
			return fmt.Errorf("added_tokens[%d] %q: listed with ids %d and %d", k, a.Content, prev.ID, a.ID)
		}
		if prev, ok := t.addedByID[a.ID]; ok && prev.Content != a.Content {
			return fmt.Errorf("added_tokens[%d] %q: id %d already used by %q", k, a.Content, a.ID, prev.Content)
		}
		if a.ID < len(t.idToToken) && t.idToToken[a.ID] != "" && t.idToToken[a.ID] != a.Content {
			return fmt.Errorf("added_tokens[%d] %q: id %d is %q in the model vocab", k, a.Content, a.ID, t.idToToken[a.ID])
		}
		if _, inVocab := vocab[a.Content]; !inVocab {
			if _, dup := t.addedByText[a.Content]; !dup {
				distinct++
			}
		}
		t.addedByID[a.ID] = a
		t.addedByText[a.Content] = a
		t.added = append(t.added, a)
	}
	t.vocabSize = distinct
	// Hugging Face matches special tokens first, then the others, each in
	// file order; with leftmost-longest matching the order only breaks ties
	// between identical patterns.
	ordered := make([]*AddedToken, 0, len(t.added))
	for _, a := range t.added {
		if a.Special {
			ordered = append(ordered, a)
		}
	}
	for _, a := range t.added {
		if !a.Special {
			ordered = append(ordered, a)
		}
	}
	var raw, norm []*AddedToken
	var rawPat, normPat []string
	for _, a := range ordered {
		if a.Normalized {
			p := a.Content
			if t.normalizer != nil {
				p = t.normalizer.normalize(p)
			}
			norm, normPat = append(norm, a), append(normPat, p)
		} else {
			raw, rawPat = append(raw, a), append(rawPat, a.Content)
		}
	}
	if len(raw) > 0 {
		t.rawAdded = newAddedMatcher(raw, rawPat)
	}
	if len(norm) > 0 {
		t.normAdded = newAddedMatcher(norm, normPat)
	}
	return nil
}

// Encode returns the ids of text without adding special tokens, like Hugging
// Face's encode(text, add_special_tokens=False). Added and special tokens
// written in the text (e.g. "<|im_start|>") are recognised and encoded as
// their single id. Invalid UTF-8 is first replaced by U+FFFD, one per
// maximal ill-formed subsequence.
func (t *Tokenizer) Encode(text string) []int {
	return t.AppendEncode(make([]int, 0, len(text)/3+1), text)
}

// AppendEncode appends the ids of text (as Encode) to dst. When a
// tokenizer.json regex runs past RegexTimeout, it returns the ids encoded so
// far and Err reports the pattern; TryEncode returns the error instead.
func (t *Tokenizer) AppendEncode(dst []int, text string) []int {
	out, err := t.appendEncodeGuarded(dst, text)
	if err != nil {
		t.lastErr.CompareAndSwap(nil, &err)
	}
	return out
}

// TryEncode is Encode that fails with a *RegexTimeoutError naming the
// pattern when a tokenizer.json regex runs past RegexTimeout.
func (t *Tokenizer) TryEncode(text string) ([]int, error) {
	return t.appendEncodeGuarded(make([]int, 0, len(text)/3+1), text)
}

// Err returns the first regex timeout any Encode or Decode of this
// tokenizer hit (nil when none): they cannot return it.
func (t *Tokenizer) Err() error {
	if p := t.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// appendEncodeGuarded runs appendEncode and turns a regex timeout, which a
// matcher raises as a panic deep inside the pre-tokenizer, into an error.
func (t *Tokenizer) appendEncodeGuarded(dst []int, text string) (out []int, err error) {
	out = dst
	defer recoverRegexTimeout(&err)
	return t.appendEncode(dst, text, &out), nil
}

// appendEncode appends the ids of text to dst, mirroring the slice into
// *progress so that a caller recovering from a timeout keeps what was done.
func (t *Tokenizer) appendEncode(dst []int, text string, progress *[]int) []int {
	text = lossyUTF8(text)
	word := func(w string) {
		for limit := t.limits.MaxWordBytes; limit > 0 && len(w) > limit; {
			cut := limit
			for cut > 0 && !utf8.RuneStart(w[cut]) {
				cut--
			}
			if cut == 0 { // no boundary in range (cannot happen with valid UTF-8)
				cut = limit
			}
			dst = t.model.tokenize(w[:cut], dst)
			w = w[cut:]
		}
		dst = t.model.tokenize(w, dst)
		*progress = dst
	}
	t.rawAdded.split(text, func(piece string, tok *AddedToken) {
		if tok != nil {
			dst = append(dst, tok.ID)
			*progress = dst
			return
		}
		if t.normalizer != nil {
			piece = t.normalizer.normalize(piece)
		}
		t.normAdded.split(piece, func(p string, tok *AddedToken) {
			switch {
			case tok != nil:
				dst = append(dst, tok.ID)
				*progress = dst
			case t.preTok == nil:
				word(p)
			default:
				t.preTok.preTokenize(p, word)
			}
		})
	})
	return dst
}

// EncodeWithSpecial returns Encode(text) wrapped in the special tokens of
// the post-processor, e.g. [CLS] … [SEP] for BERT; for Qwen (ByteLevel
// post-processor) it equals Encode.
func (t *Tokenizer) EncodeWithSpecial(text string) []int {
	return t.PostProcess(t.Encode(text))
}

// PostProcess adds the post-processor's special tokens around ids (for
// callers that truncate first: keep at most maxLen-NumSpecialTokens() ids).
func (t *Tokenizer) PostProcess(ids []int) []int {
	if t.post == nil {
		return ids
	}
	return t.post.process(ids)
}

// NumSpecialTokens is the number of ids PostProcess adds.
func (t *Tokenizer) NumSpecialTokens() int {
	return len(t.PostProcess(nil))
}

// Decode turns ids back into text through the decoder, like Hugging Face's
// decode: ids outside the vocabulary are skipped, and so are special
// tokens when skipSpecial is set.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		tok, ok := t.IDToken(id)
		if !ok {
			continue
		}
		if skipSpecial {
			if a := t.addedByText[tok]; a != nil && a.Special {
				continue
			}
		}
		toks = append(toks, tok)
	}
	if t.decoder == nil {
		return strings.Join(toks, " ")
	}
	out, err := t.decodeGuarded(toks)
	if err != nil { // a Replace decoder's regex timed out: tokens as they are
		t.lastErr.CompareAndSwap(nil, &err)
		return strings.Join(toks, "")
	}
	return out
}

func (t *Tokenizer) decodeGuarded(toks []string) (out string, err error) {
	defer recoverRegexTimeout(&err)
	return strings.Join(t.decoder.decodeChain(toks), ""), nil
}

// TokenID returns the id of a token string (an added token or a model
// vocabulary entry, in the model's own alphabet, e.g. "Ġthe" for BPE).
func (t *Tokenizer) TokenID(s string) (int, bool) {
	if a, ok := t.addedByText[s]; ok {
		return a.ID, true
	}
	id, ok := t.model.vocab()[s]
	return id, ok
}

// IDToken returns the token string of an id.
func (t *Tokenizer) IDToken(id int) (string, bool) {
	if a, ok := t.addedByID[id]; ok {
		return a.Content, true
	}
	if id >= 0 && id < len(t.idToToken) && t.idToToken[id] != "" {
		return t.idToToken[id], true
	}
	return "", false
}

// VocabSize is the number of distinct tokens, added tokens included
// (Hugging Face's get_vocab_size(with_added_tokens=True)): 151,669 for
// Qwen3. A model's embedding matrix may have more rows (padding).
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// AddedTokens returns the added tokens, sorted by id.
func (t *Tokenizer) AddedTokens() []AddedToken {
	out := make([]AddedToken, len(t.added))
	for i, a := range t.added {
		out[i] = *a
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Family is the chat-template family: "qwen3", "qwen2.5", or "" if unknown.
func (t *Tokenizer) Family() string { return t.family }

// maxTokenID bounds ids so that id-indexed tables stay small.
const maxTokenID = 1<<24 - 1

// vocabByID inverts a vocabulary, checking that ids are distinct and dense
// enough for an id-indexed table (real vocabularies use 0..n-1).
func vocabByID(vocab map[string]int) ([]string, error) {
	maxID := -1
	for _, id := range vocab {
		maxID = max(maxID, id)
	}
	if maxID >= 2*len(vocab)+1024 {
		return nil, fmt.Errorf("vocab: ids too sparse (max id %d for %d tokens)", maxID, len(vocab))
	}
	byID := make([]string, maxID+1)
	set := make([]bool, maxID+1)
	for tok, id := range vocab {
		if set[id] {
			a, b := byID[id], tok
			if b < a {
				a, b = b, a
			}
			return nil, fmt.Errorf("vocab: id %d is used by both %q and %q", id, a, b)
		}
		byID[id], set[id] = tok, true
	}
	return byID, nil
}

// decodeComponent decodes the JSON of a pipeline component (what names it
// in errors: "decoder", "pre_tokenizer" …); ok is false when it is null.
func decodeComponent[J any](what string, raw json.RawMessage) (j J, ok bool, err error) {
	if isNull(raw) {
		return j, false, nil
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return j, false, fmt.Errorf("%s: %w", what, err)
	}
	return j, true, nil
}

// parseSequence parses the members of a Sequence component of kind T
// (decoder, normalizer, …) into S, the sequence type that chains them,
// dropping null members; errors name the member: "decoder Sequence[2]: …".
func parseSequence[S ~[]T, T any](what string, raws []json.RawMessage, parse func(json.RawMessage) (T, error)) (T, error) {
	var seq S
	for k, r := range raws {
		x, err := parse(r)
		if err != nil {
			var none T
			return none, fmt.Errorf("%s Sequence[%d]: %w", what, k, err)
		}
		if any(x) != nil {
			seq = append(seq, x)
		}
	}
	return any(seq).(T), nil
}

// chain runs x through the stages of a Sequence component in order.
func chain[T, X any](seq []T, x X, apply func(T, X) X) X {
	for _, stage := range seq {
		x = apply(stage, x)
	}
	return x
}

// unsupportedComponent is the error for a component whose "type" is
// missing or not implemented.
func unsupportedComponent(what, typ string) error {
	if typ == "" {
		return fmt.Errorf("%s without a type", what)
	}
	return fmt.Errorf("unsupported %s type %q", what, typ)
}

func isNull(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) == 0 || bytes.Equal(b, []byte("null"))
}

func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}
