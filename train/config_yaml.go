package train

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cas-engine/cas/internal/guard"
	"github.com/cas-engine/cas/internal/loadfile"
)

// The YAML side of a run file: base files merged key by key, --set
// overrides applied to the node tree, and every key checked against the
// Config type (with its file and line) before decoding.

// LoadConfig reads a YAML run file over DefaultConfig, applies the
// key=value overrides (dotted YAML paths, values in YAML syntax, e.g.
// aci.rho=0.1 or data.train=[a.jsonl,b.parquet]), resolves relative paths
// against the file's folder, and validates the result. Unknown keys are
// errors. A top-level "base: other.yaml" (relative to the file) is read
// first and overlaid key by key, so an ablation states only what it
// changes.
func LoadConfig(path string, sets []string) (*Config, error) {
	origin := map[*yaml.Node]string{}
	root, err := loadConfigNode(path, 0, origin)
	if err != nil {
		return nil, err
	}
	if err := checkKeys(root, reflect.TypeOf(Config{}), "", origin); err != nil {
		return nil, err
	}
	cfg, err := decodeConfig(root, sets)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	cfg.ResolvePaths(filepath.Dir(path))
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes YAML over DefaultConfig and applies overrides; it does
// not follow "base", resolve paths nor validate.
func ParseConfig(raw []byte, sets []string) (*Config, error) {
	root, err := parseConfigNode(raw)
	if err != nil {
		return nil, err
	}
	if err := checkKeys(root, reflect.TypeOf(Config{}), "", nil); err != nil {
		return nil, err
	}
	return decodeConfig(root, sets)
}

// parseConfigNode parses YAML into its top-level mapping node.
func parseConfigNode(raw []byte) (*yaml.Node, error) {
	var doc yaml.Node
	// yaml.v3 is third-party: a panic on hostile input becomes an error.
	if err := guard.Run("YAML", func() error { return yaml.Unmarshal(raw, &doc) }); err != nil {
		return nil, err
	}
	if doc.Kind == 0 { // empty file
		return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}, nil
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("config: the top level must be a mapping")
	}
	return doc.Content[0], nil
}

// loadConfigNode reads a config file's mapping with its base files merged
// under it.
func loadConfigNode(path string, depth int, origin map[*yaml.Node]string) (*yaml.Node, error) {
	if depth > 8 {
		return nil, fmt.Errorf("load %s: base files nested more than 8 deep (a cycle?)", path)
	}
	node, err := loadfile.Parse(path, parseConfigNode)
	if err != nil {
		return nil, err
	}
	markOrigin(node, path, origin)
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value != "base" {
			continue
		}
		base := node.Content[i+1].Value
		node.Content = append(node.Content[:i:i], node.Content[i+2:]...)
		if !filepath.IsAbs(base) {
			base = filepath.Join(filepath.Dir(path), base)
		}
		parent, err := loadConfigNode(base, depth+1, origin)
		if err != nil {
			return nil, fmt.Errorf("load %s: base: %w", path, err)
		}
		mergeMapping(parent, node)
		return parent, nil
	}
	return node, nil
}

// mergeMapping overlays src's keys onto dst, recursing into mappings present
// in both; other values (scalars, lists) are replaced.
func mergeMapping(dst, src *yaml.Node) {
	for i := 0; i+1 < len(src.Content); i += 2 {
		key, val := src.Content[i], src.Content[i+1]
		found := false
		for j := 0; j+1 < len(dst.Content); j += 2 {
			if dst.Content[j].Value != key.Value {
				continue
			}
			found = true
			if dst.Content[j+1].Kind == yaml.MappingNode && val.Kind == yaml.MappingNode {
				mergeMapping(dst.Content[j+1], val)
			} else {
				dst.Content[j+1] = val
			}
			break
		}
		if !found {
			dst.Content = append(dst.Content, key, val)
		}
	}
}

// decodeConfig applies overrides to a mapping node and decodes it over
// DefaultConfig, rejecting unknown keys.
func decodeConfig(root *yaml.Node, sets []string) (*Config, error) {
	for _, s := range sets {
		if err := applySet(root, s); err != nil {
			return nil, err
		}
	}
	b, err := yaml.Marshal(root)
	if err != nil {
		return nil, err
	}
	cfg := DefaultConfig()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && err != io.EOF {
		return nil, fmt.Errorf("config: %w", err)
	}
	if cfg.Model.LegacyChatFamily != "" {
		if cfg.Model.ChatFamily == "" {
			cfg.Model.ChatFamily = cfg.Model.LegacyChatFamily
		}
		cfg.Model.LegacyChatFamily = ""
	}
	if cfg.Retriever.LegacyServer != "" {
		if cfg.Retriever.Server == "" {
			cfg.Retriever.Server = cfg.Retriever.LegacyServer
		}
		cfg.Retriever.LegacyServer = ""
	}
	return &cfg, nil
}

// markOrigin records the file every node of a parsed file came from, so
// that an unknown key is reported with its own file and line even after
// base files are merged.
func markOrigin(n *yaml.Node, path string, origin map[*yaml.Node]string) {
	if origin == nil {
		return
	}
	origin[n] = path
	for _, c := range n.Content {
		markOrigin(c, path, origin)
	}
}

// yamlFields maps the YAML keys of a struct type to their field types,
// the keys of ",inline" fields (the embedded leaf configs) included.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fs := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if opts == "inline" {
			maps.Copy(fs, yamlFields(f.Type))
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fs[name] = f.Type
	}
	return fs
}

// keyError names an unknown config key, the keys known there, and where the
// key came from (the file and line, or the --set flag).
func keyError(key, where string, t reflect.Type) error {
	known := slices.Sorted(maps.Keys(yamlFields(t)))
	return fmt.Errorf("%s: unknown config key %s (known here: %s)", where, key, strings.Join(known, ", "))
}

// checkKeys reports the first key of a mapping node that the struct type t
// does not have, recursing into nested sections.
func checkKeys(n *yaml.Node, t reflect.Type, prefix string, origin map[*yaml.Node]string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind != yaml.MappingNode || t.Kind() != reflect.Struct {
		return nil
	}
	fs := yamlFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		key := prefix + k.Value
		ft, ok := fs[k.Value]
		if !ok && !(prefix == "" && k.Value == "base") {
			return keyError(key, nodeWhere(k, origin), t)
		}
		if !ok {
			continue
		}
		if err := checkText(n.Content[i+1], ft); err != nil {
			return fmt.Errorf("%s: %s: %w", nodeWhere(k, origin), key, err)
		}
		if err := checkKeys(n.Content[i+1], ft, key+".", origin); err != nil {
			return err
		}
	}
	return nil
}

// nodeWhere names a node's file and line ("line N" without a file).
func nodeWhere(k *yaml.Node, origin map[*yaml.Node]string) string {
	if f, ok := origin[k]; ok {
		return fmt.Sprintf("%s:%d", f, k.Line)
	}
	return fmt.Sprintf("line %d", k.Line)
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// checkText decodes a scalar meant for a named setting (an enum such as
// agent.TurnRule or conformal.ACIRule, which implement
// encoding.TextUnmarshaler) so that a bad name is reported with its key,
// file and line rather than by the YAML decoder without either.
func checkText(n *yaml.Node, t reflect.Type) error {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || !reflect.PointerTo(t).Implements(textUnmarshaler) {
		return nil
	}
	return reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value))
}

// checkSetKey checks a --set key's dotted path against the Config type and
// returns the type of the field it names.
func checkSetKey(set string, parts []string) (reflect.Type, error) {
	t := reflect.TypeOf(Config{})
	for i, p := range parts {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil, fmt.Errorf("--set %s: %s is not a section", set, strings.Join(parts[:i], "."))
		}
		ft, ok := yamlFields(t)[p]
		if !ok {
			return nil, keyError(strings.Join(parts[:i+1], "."), "--set "+set, t)
		}
		t = ft
	}
	return t, nil
}

// applySet sets a dotted key of a YAML mapping to a YAML value, creating
// intermediate mappings.
func applySet(root *yaml.Node, set string) error {
	key, val, ok := strings.Cut(set, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return fmt.Errorf("--set %q: want key=value", set)
	}
	var value yaml.Node
	if err := yaml.Unmarshal([]byte(val), &value); err != nil {
		return fmt.Errorf("--set %s: value: %w", key, err)
	}
	v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	if len(value.Content) == 1 {
		v = value.Content[0]
	}
	parts := strings.Split(key, ".")
	ft, err := checkSetKey(set, parts)
	if err != nil {
		return err
	}
	if err := checkText(v, ft); err != nil {
		return fmt.Errorf("--set %s: %w", set, err)
	}
	node := root
	for i, p := range parts {
		if p == "" {
			return fmt.Errorf("--set %s: empty path element", key)
		}
		if node.Kind != yaml.MappingNode {
			return fmt.Errorf("--set %s: %s is not a mapping", key, strings.Join(parts[:i], "."))
		}
		var child *yaml.Node
		for j := 0; j+1 < len(node.Content); j += 2 {
			if node.Content[j].Value == p {
				child = node.Content[j+1]
				if i == len(parts)-1 {
					node.Content[j+1] = v
				}
				break
			}
		}
		if i == len(parts)-1 {
			if child == nil {
				node.Content = append(node.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: p}, v)
			}
			return nil
		}
		if child == nil {
			child = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			node.Content = append(node.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: p}, child)
		}
		node = child
	}
	return nil
}
