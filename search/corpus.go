package search

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/internal/meter"
)

// Doc is one corpus passage in the wiki-18 format
// {"id": ..., "contents": "\"Title\"\ntext"}.
type Doc struct {
	ID       string
	Contents string
	Title    string // first line of Contents, surrounding quotes removed
	Text     string // the rest of Contents
}

// SplitContents splits a wiki-18 `contents` string into title and text the
// way Search-R1 does: title = first line with surrounding double quotes
// stripped, text = everything after the first newline.
func SplitContents(contents string) (title, text string) {
	title, text, _ = strings.Cut(contents, "\n")
	return strings.Trim(title, "\""), text
}

// docLine is the JSON shape of a corpus line. `id` may be a string or a
// number; corpora that carry `title` and `text` instead of `contents` are
// accepted (contents = title + "\n" + text).
type docLine struct {
	ID       json.RawMessage `json:"id"`
	Contents *string         `json:"contents"`
	Title    *string         `json:"title"`
	Text     *string         `json:"text"`
}

// ParseDocLine decodes one JSONL corpus line.
func ParseDocLine(line []byte) (Doc, error) {
	var l docLine
	if err := json.Unmarshal(line, &l); err != nil {
		return Doc{}, err
	}
	id, err := parseID(l.ID)
	if err != nil {
		return Doc{}, err
	}
	var contents string
	switch {
	case l.Contents != nil:
		contents = *l.Contents
	case l.Text != nil:
		if l.Title != nil {
			contents = *l.Title + "\n" + *l.Text
		} else {
			contents = *l.Text
		}
	default:
		return Doc{}, errors.New(`missing "contents"`)
	}
	title, text := SplitContents(contents)
	return Doc{ID: id, Contents: contents, Title: title, Text: text}, nil
}

func parseID(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New(`missing "id"`)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("id: %w", err)
		}
		return s, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", fmt.Errorf(`"id" must be a string or a number: %w`, err)
	}
	return n.String(), nil
}

// Corpus serves passages of a JSONL file by row or id without loading the
// file: an offsets table (8 bytes a passage, 168 MB for wiki-18's 21M
// passages) locates each line, which is read with one ReadAt. It is safe for
// concurrent use.
type Corpus struct {
	path    string
	f       *os.File
	offsets []uint64 // len n+1; line i is [offsets[i], offsets[i+1]) minus its newline
	seqIDs  bool     // id of row i is strconv.Itoa(i): no id table needed
	idHash  []uint64 // sorted hashes of ids (when !seqIDs)
	idRow   []uint32 // rows, parallel to idHash
}

// Offsets file layout (little-endian):
//
//	magic "CASOFFS1" | version u32 | flags u32 (bit 0: sequential ids)
//	n u64 | corpus size u64 | corpus fingerprint u64
//	offsets [n+1]u64
//	if !sequential: idHash [n]u64, idRow [n]u32
//	crc32-Castagnoli u32 of everything before
const (
	offsetsMagic   = "CASOFFS1"
	offsetsVersion = 1
	flagSeqIDs     = 1
)

var corpusCRC = crc32.MakeTable(crc32.Castagnoli)

// openCorpusFile opens the JSONL corpus and stats it.
func openCorpusFile(path string) (*os.File, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open corpus: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	return f, st, nil
}

// BuildCorpusOffsets scans a JSONL corpus once, validating every line, and
// writes its offsets table to offsetsPath (temp file + rename). Blank lines
// are skipped. progress, when non-nil, receives a progress bar.
func BuildCorpusOffsets(corpusPath, offsetsPath string, progress io.Writer) (*Corpus, error) {
	f, st, err := openCorpusFile(corpusPath)
	if err != nil {
		return nil, err
	}
	bar := meter.NewBytes(progress, st.Size(), "corpus offsets")
	c := &Corpus{path: corpusPath, f: f, seqIDs: true}
	var ids []string
	err = scanJSONLines(io.TeeReader(f, bar), func(lineNo int, off uint64, line []byte) error {
		d, err := ParseDocLine(line)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", corpusPath, lineNo, err)
		}
		row := len(c.offsets)
		c.offsets = append(c.offsets, off)
		if c.seqIDs && d.ID != strconv.Itoa(row) {
			c.seqIDs = false
			ids = make([]string, row, row+1024)
			for i := range ids {
				ids[i] = strconv.Itoa(i)
			}
		}
		if !c.seqIDs {
			ids = append(ids, d.ID)
		}
		return nil
	})
	bar.Finish()
	if err != nil {
		f.Close()
		return nil, err
	}
	c.offsets = append(c.offsets, uint64(st.Size()))
	if len(c.offsets)-1 > 1<<32-1 {
		f.Close()
		return nil, fmt.Errorf("%s: %d passages exceed 2^32", corpusPath, len(c.offsets)-1)
	}
	if !c.seqIDs {
		c.buildIDTable(ids)
	}
	fp, err := corpusFingerprint(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fingerprint %s: %w", corpusPath, err)
	}
	if err := c.writeOffsets(offsetsPath, uint64(st.Size()), fp); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// scanJSONLines calls fn for every non-blank line with its 1-based line number
// and byte offset. Lines may be arbitrarily long.
func scanJSONLines(r io.Reader, fn func(lineNo int, off uint64, line []byte) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	var (
		off    uint64
		lineNo int
		long   []byte
	)
	for {
		chunk, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, chunk...)
			continue
		}
		line := chunk
		if long != nil {
			long = append(long, chunk...)
			line = long
		}
		if len(line) > 0 {
			lineNo++
			n := uint64(len(line))
			trimmed := bytes.TrimRight(line, "\r\n")
			if len(bytes.TrimSpace(trimmed)) > 0 {
				if ferr := fn(lineNo, off, trimmed); ferr != nil {
					return ferr
				}
			}
			off += n
		}
		long = long[:0]
		if long != nil && cap(long) > 1<<24 {
			long = nil
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read line %d: %w", lineNo+1, err)
		}
	}
}

// corpusFingerprint hashes the size and the first and last 64 KiB of the corpus,
// so an offsets table is never used with another file.
func corpusFingerprint(f *os.File, size int64) (uint64, error) {
	h := fnv.New64a()
	var sz [8]byte
	binary.LittleEndian.PutUint64(sz[:], uint64(size))
	h.Write(sz[:])
	const block = 64 << 10
	buf := make([]byte, block)
	for _, at := range []int64{0, max(0, size-block)} {
		n, err := f.ReadAt(buf[:min(block, size)], at)
		if err != nil && err != io.EOF {
			return 0, err
		}
		h.Write(buf[:n])
	}
	return h.Sum64(), nil
}

func corpusIDHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

func (c *Corpus) buildIDTable(ids []string) {
	rows := make([]uint32, len(ids))
	for i := range rows {
		rows[i] = uint32(i)
	}
	hashes := make([]uint64, len(ids))
	for i, id := range ids {
		hashes[i] = corpusIDHash(id)
	}
	sort.Slice(rows, func(a, b int) bool {
		ha, hb := hashes[rows[a]], hashes[rows[b]]
		if ha != hb {
			return ha < hb
		}
		return rows[a] < rows[b]
	})
	c.idHash = make([]uint64, len(rows))
	for i, r := range rows {
		c.idHash[i] = hashes[r]
	}
	c.idRow = rows
}

func (c *Corpus) writeOffsets(path string, size, fp uint64) error {
	n := len(c.offsets) - 1
	size0 := 40 + 8*(n+1) + 4
	if !c.seqIDs {
		size0 += 12 * n
	}
	buf := make([]byte, 0, size0)
	buf = append(buf, offsetsMagic...)
	buf = binary.LittleEndian.AppendUint32(buf, offsetsVersion)
	var flags uint32
	if c.seqIDs {
		flags |= flagSeqIDs
	}
	buf = binary.LittleEndian.AppendUint32(buf, flags)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(n))
	buf = binary.LittleEndian.AppendUint64(buf, size)
	buf = binary.LittleEndian.AppendUint64(buf, fp)
	for _, o := range c.offsets {
		buf = binary.LittleEndian.AppendUint64(buf, o)
	}
	if !c.seqIDs {
		for _, h := range c.idHash {
			buf = binary.LittleEndian.AppendUint64(buf, h)
		}
		for _, r := range c.idRow {
			buf = binary.LittleEndian.AppendUint32(buf, r)
		}
	}
	buf = binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, corpusCRC))
	return atomicfile.WriteFile(path, buf)
}

// OpenCorpus opens a corpus with the offsets table BuildCorpusOffsets wrote,
// checking that the table belongs to this file (size and fingerprint).
func OpenCorpus(corpusPath, offsetsPath string) (*Corpus, error) {
	raw, err := os.ReadFile(offsetsPath)
	if err != nil {
		return nil, fmt.Errorf("read offsets: %w", err)
	}
	c, size, fp, err := decodeOffsets(raw)
	if err != nil {
		return nil, fmt.Errorf("offsets %s: %w", offsetsPath, err)
	}
	f, st, err := openCorpusFile(corpusPath)
	if err != nil {
		return nil, err
	}
	if uint64(st.Size()) != size {
		f.Close()
		return nil, fmt.Errorf("offsets %s were built for a %d-byte corpus, %s has %d bytes", offsetsPath, size, corpusPath, st.Size())
	}
	got, err := corpusFingerprint(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("fingerprint %s: %w", corpusPath, err)
	}
	if got != fp {
		f.Close()
		return nil, fmt.Errorf("offsets %s do not match %s (fingerprint %016x, want %016x)", offsetsPath, corpusPath, got, fp)
	}
	c.path, c.f = corpusPath, f
	return c, nil
}

// decodeOffsets parses an offsets file, validating every field.
func decodeOffsets(raw []byte) (c *Corpus, size, fp uint64, err error) {
	const header = 8 + 4 + 4 + 8 + 8 + 8
	if len(raw) < header+4 {
		return nil, 0, 0, fmt.Errorf("truncated (%d bytes)", len(raw))
	}
	if string(raw[:8]) != offsetsMagic {
		return nil, 0, 0, errors.New("not a cas corpus offsets file (wrong magic number)")
	}
	body := raw[:len(raw)-4]
	if want, got := binary.LittleEndian.Uint32(raw[len(raw)-4:]), crc32.Checksum(body, corpusCRC); want != got {
		return nil, 0, 0, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	if v := binary.LittleEndian.Uint32(raw[8:]); v != offsetsVersion {
		return nil, 0, 0, fmt.Errorf("unsupported version %d", v)
	}
	flags := binary.LittleEndian.Uint32(raw[12:])
	n := binary.LittleEndian.Uint64(raw[16:])
	size = binary.LittleEndian.Uint64(raw[24:])
	fp = binary.LittleEndian.Uint64(raw[32:])
	if n > 1<<32-1 {
		return nil, 0, 0, fmt.Errorf("passage count %d too large", n)
	}
	c = &Corpus{seqIDs: flags&flagSeqIDs != 0}
	want := uint64(header) + 8*(n+1)
	if !c.seqIDs {
		want += 12 * n
	}
	if uint64(len(body)) != want {
		return nil, 0, 0, fmt.Errorf("size %d bytes, want %d for %d passages", len(raw), want+4, n)
	}
	p := body[header:]
	c.offsets = make([]uint64, n+1)
	for i := range c.offsets {
		c.offsets[i] = binary.LittleEndian.Uint64(p[8*i:])
		if i > 0 && c.offsets[i] < c.offsets[i-1] {
			return nil, 0, 0, fmt.Errorf("offsets not increasing at row %d", i)
		}
	}
	if c.offsets[n] != size {
		return nil, 0, 0, fmt.Errorf("last offset %d != corpus size %d", c.offsets[n], size)
	}
	if !c.seqIDs {
		p = p[8*(n+1):]
		c.idHash = make([]uint64, n)
		c.idRow = make([]uint32, n)
		for i := range c.idHash {
			c.idHash[i] = binary.LittleEndian.Uint64(p[8*i:])
			if i > 0 && c.idHash[i] < c.idHash[i-1] {
				return nil, 0, 0, fmt.Errorf("id table not sorted at %d", i)
			}
		}
		p = p[8*n:]
		for i := range c.idRow {
			c.idRow[i] = binary.LittleEndian.Uint32(p[4*i:])
			if uint64(c.idRow[i]) >= n {
				return nil, 0, 0, fmt.Errorf("id table row %d out of range", c.idRow[i])
			}
		}
	}
	return c, size, fp, nil
}

// Len returns the number of passages.
func (c *Corpus) Len() int { return len(c.offsets) - 1 }

// Path returns the corpus file path.
func (c *Corpus) Path() string { return c.path }

// Close closes the corpus file.
func (c *Corpus) Close() error { return c.f.Close() }

// Line returns the raw JSON line of a row (without its newline).
func (c *Corpus) Line(row int) ([]byte, error) {
	if row < 0 || row >= c.Len() {
		return nil, fmt.Errorf("corpus %s: row %d out of range [0, %d)", c.path, row, c.Len())
	}
	start, end := c.offsets[row], c.offsets[row+1]
	buf := make([]byte, end-start)
	if _, err := c.f.ReadAt(buf, int64(start)); err != nil && !(err == io.EOF && len(buf) > 0) {
		return nil, fmt.Errorf("corpus %s: read row %d: %w", c.path, row, err)
	}
	return bytes.TrimRight(buf, "\r\n \t"), nil
}

// Doc returns the passage at a row (0-based line among non-blank lines; the
// row is what a vector index stores as the passage's id).
func (c *Corpus) Doc(row int) (Doc, error) {
	line, err := c.Line(row)
	if err != nil {
		return Doc{}, err
	}
	d, err := ParseDocLine(line)
	if err != nil {
		return Doc{}, fmt.Errorf("corpus %s: row %d: %w", c.path, row, err)
	}
	return d, nil
}

// Lookup returns the row of the passage whose "id" is id.
func (c *Corpus) Lookup(id string) (int, bool) {
	if c.seqIDs {
		row, err := strconv.Atoi(id)
		if err != nil || row < 0 || row >= c.Len() || strconv.Itoa(row) != id {
			return 0, false
		}
		return row, true
	}
	h := corpusIDHash(id)
	for i := sort.Search(len(c.idHash), func(i int) bool { return c.idHash[i] >= h }); i < len(c.idHash) && c.idHash[i] == h; i++ {
		d, err := c.Doc(int(c.idRow[i]))
		if err == nil && d.ID == id {
			return int(c.idRow[i]), true
		}
	}
	return 0, false
}

// DocByID returns the passage whose "id" is id.
func (c *Corpus) DocByID(id string) (Doc, error) {
	row, ok := c.Lookup(id)
	if !ok {
		return Doc{}, fmt.Errorf("corpus %s: no passage with id %q", c.path, id)
	}
	return c.Doc(row)
}

// Scan reads the corpus sequentially and calls fn for every passage in row
// order. It stops at the first error fn returns.
func (c *Corpus) Scan(progress io.Writer, fn func(row int, d Doc) error) error {
	sr := io.NewSectionReader(c.f, 0, int64(c.offsets[c.Len()]))
	bar := meter.NewBytes(progress, int64(c.offsets[c.Len()]), "read corpus")
	defer bar.Finish()
	row := 0
	return scanJSONLines(io.TeeReader(sr, bar), func(lineNo int, off uint64, line []byte) error {
		if row >= c.Len() || off != c.offsets[row] {
			return fmt.Errorf("corpus %s:%d changed since its offsets were built", c.path, lineNo)
		}
		d, err := ParseDocLine(line)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", c.path, lineNo, err)
		}
		if err := fn(row, d); err != nil {
			return err
		}
		row++
		return nil
	})
}
