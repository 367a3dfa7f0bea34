package train

import (
	"path/filepath"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/internal/relpath"
)

// filePaths lists every field of the config that names a file or folder.
func (c *Config) filePaths() []*string {
	ps := []*string{&c.Model.Path, &c.Model.Tokenizer, &c.Model.Reference, &c.Retriever.Index, &c.Retriever.Corpus,
		&c.APS.QHatFile, &c.ACI.Bootstrap}
	for i := range c.Data.Train {
		ps = append(ps, &c.Data.Train[i])
	}
	for i := range c.ACI.CalibData {
		ps = append(ps, &c.ACI.CalibData[i])
	}
	return ps
}

// ResolvePaths makes every relative path absolute against dir (the folder
// of the file the config was read from; see internal/relpath).
func (c *Config) ResolvePaths(dir string) {
	for _, p := range c.filePaths() {
		*p = relpath.Resolve(dir, *p)
		if a, err := relpath.Abs(*p); err == nil {
			*p = a
		}
	}
}

// AbsPaths makes every relative path absolute against the working
// directory (a config built in code, e.g. by the demo).
func (c *Config) AbsPaths() error {
	for _, p := range c.filePaths() {
		a, err := relpath.Abs(*p)
		if err != nil {
			return err
		}
		*p = a
	}
	return nil
}

// storedPaths returns a copy of c whose paths are written the way the one
// path rule says (internal/relpath): relative to dir when under root (""
// means dir), else absolute.
func (c *Config) storedPaths(dir, root string) (*Config, error) {
	s := *c
	s.Data.Train = slices.Clone(c.Data.Train)
	s.ACI.CalibData = slices.Clone(c.ACI.CalibData)
	for _, p := range s.filePaths() {
		v, err := relpath.Store(dir, root, *p)
		if err != nil {
			return nil, err
		}
		*p = v
	}
	return &s, nil
}

// Save writes the config as YAML (atomically), its paths relative to the
// file's folder when they lie under root ("" means that folder), else
// absolute, so that LoadConfig reads them back whatever the working
// directory and a moved or copied run folder keeps working.
func (c *Config) Save(path, root string) error {
	s, err := c.storedPaths(filepath.Dir(path), root)
	if err != nil {
		return err
	}
	b, err := yaml.Marshal(s)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}

// writeFileAtomic writes b to path atomically and syncs its directory so the
// rename is durable.
func writeFileAtomic(path string, b []byte) error {
	if err := atomicfile.WriteFile(path, b); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs a directory so that renames into it are durable.
func syncDir(dir string) error { return atomicfile.SyncDir(dir) }
