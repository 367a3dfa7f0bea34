package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Standard file names of a Hugging Face model folder.
const (
	SingleFileName = "model.safetensors"
	IndexFileName  = "model.safetensors.index.json"
)

// Dir is a model folder's weights: one file or several shards.
type Dir struct {
	path    string
	files   []*File
	owner   map[string]*File
	names   []string
	meta    map[string]string
	sharded bool
}

var _ Reader = (*Dir)(nil)

// shardIndex is model.safetensors.index.json.
type shardIndex struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// OpenDir opens the weights of a model folder: model.safetensors when present,
// otherwise the shards listed by model.safetensors.index.json. Every tensor in
// the index must be found in the shard it names, and no tensor may appear in
// two shards.
func OpenDir(dir string) (*Dir, error) {
	single := filepath.Join(dir, SingleFileName)
	if _, err := os.Stat(single); err == nil {
		f, err := Open(single)
		if err != nil {
			return nil, err
		}
		return newDir(dir, []*File{f}, false)
	}
	indexPath := filepath.Join(dir, IndexFileName)
	js, err := os.ReadFile(indexPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("model folder %s: neither %s nor %s found", dir, SingleFileName, IndexFileName)
		}
		return nil, err
	}
	var idx shardIndex
	if err := json.Unmarshal(js, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", indexPath, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: empty weight_map", indexPath)
	}
	shardNames := map[string]bool{}
	for name, shard := range idx.WeightMap {
		if shard == "" || shard != filepath.Base(shard) || strings.ContainsAny(shard, `/\`) || shard == ".." || shard == "." {
			return nil, fmt.Errorf("%s: tensor %q: bad shard file name %q", indexPath, name, shard)
		}
		shardNames[shard] = true
	}
	ordered := make([]string, 0, len(shardNames))
	for s := range shardNames {
		ordered = append(ordered, s)
	}
	sort.Strings(ordered)
	files := make([]*File, 0, len(ordered))
	byShard := map[string]*File{}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, s := range ordered {
		f, err := Open(filepath.Join(dir, s))
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("%s: %w", indexPath, err)
		}
		files = append(files, f)
		byShard[s] = f
	}
	for name, shard := range idx.WeightMap {
		if _, ok := byShard[shard].Info(name); !ok {
			closeAll()
			return nil, fmt.Errorf("%s: tensor %q is mapped to %s, which does not contain it", indexPath, name, shard)
		}
	}
	return newDir(dir, files, true)
}

func newDir(path string, files []*File, sharded bool) (*Dir, error) {
	d := &Dir{path: path, files: files, owner: map[string]*File{}, sharded: sharded}
	for _, f := range files {
		for _, n := range f.h.names {
			if prev, dup := d.owner[n]; dup {
				d.Close()
				return nil, fmt.Errorf("model folder %s: tensor %q is in both %s and %s", path, n, prev.path, f.path)
			}
			d.owner[n] = f
			d.names = append(d.names, n)
		}
		if d.meta == nil {
			d.meta = f.h.metadata
		}
	}
	sort.Strings(d.names)
	return d, nil
}

// Path returns the folder.
func (d *Dir) Path() string { return d.path }

// Sharded reports whether the weights came from an index of shards.
func (d *Dir) Sharded() bool { return d.sharded }

// Files returns the underlying files.
func (d *Dir) Files() []*File { return append([]*File(nil), d.files...) }

// Names returns all tensor names, sorted.
func (d *Dir) Names() []string { return append([]string(nil), d.names...) }

// Info returns a tensor's dtype and shape.
func (d *Dir) Info(name string) (TensorInfo, bool) {
	f, ok := d.owner[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Info(name)
}

// Metadata returns the __metadata__ of the first file.
func (d *Dir) Metadata() map[string]string { return d.meta }

func (d *Dir) file(name string) (*File, error) {
	f, ok := d.owner[name]
	if !ok {
		return nil, fmt.Errorf("model folder %s: no tensor %q", d.path, name)
	}
	return f, nil
}

// Float32 converts a floating-point tensor to float32.
func (d *Dir) Float32(name string) ([]float32, []int, error) {
	f, err := d.file(name)
	if err != nil {
		return nil, nil, err
	}
	return f.Float32(name)
}

// Float32Into converts a floating-point tensor into dst.
func (d *Dir) Float32Into(name string, dst []float32) error {
	f, err := d.file(name)
	if err != nil {
		return err
	}
	return f.Float32Into(name, dst)
}

// Int64 converts an integer tensor to int64.
func (d *Dir) Int64(name string) ([]int64, []int, error) {
	f, err := d.file(name)
	if err != nil {
		return nil, nil, err
	}
	return f.Int64(name)
}

// Close closes every file.
func (d *Dir) Close() error {
	var first error
	for _, f := range d.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
