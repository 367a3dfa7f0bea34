package train

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/cas-engine/cas/internal/testfile"
)

var updateConfigGolden = flag.Bool("update-config-golden", false, "rewrite testdata/configs.golden.json")

// configSettings is everything a loaded config decides: the YAML it saves
// (as a generic tree, so key names and values are compared, not Go types)
// and the settings it hands to the rollout, the ACI controller and the
// learner. The golden file was recorded before the config mirrors were
// removed (issue 22), so it pins today's key names and values.
func configSettings(t *testing.T, c *Config, dir string) map[string]any {
	t.Helper()
	s, err := c.storedPaths(dir, filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	ro, aci := c.RolloutConfig(), c.ACI.ACIConfig
	return map[string]any{
		"yaml":    normalizeTree(tree),
		"rollout": fmt.Sprintf("%+v", ro),
		"aci":     fmt.Sprintf("%+v", aci),
		"learner": fmt.Sprintf("%+v", c.learnerConfig(331)),
	}
}

// normalizeTree makes a decoded YAML tree JSON-encodable and stable.
func normalizeTree(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = normalizeTree(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeTree(e)
		}
		return out
	}
	return fmt.Sprint(v)
}

// TestConfigsGolden: every file in configs/ (and an override) loads to the
// same settings as before the config mirrors were removed.
func TestConfigsGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "configs", "*.yaml"))
	if err != nil || len(files) < 10 {
		t.Fatalf("configs: %v (%d files)", err, len(files))
	}
	got := map[string]any{}
	dir, _ := filepath.Abs(filepath.Join("..", "configs"))
	for _, f := range files {
		c, err := LoadConfig(f, nil)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		got[filepath.Base(f)] = configSettings(t, c, dir)
	}
	sets := []string{"aci.rule=ema", "aci.quantile=linear", "aci.window_unit=scores", "rollout.turn_rule=code",
		"rollout.placement=user", "rollout.info_format=search-r1", "rollout.answer_from=text", "optim.warmup_steps=3",
		"rollout.retrieve_timeout=5s", "model.chat_template=qwen3", "aps.enabled=false"}
	c, err := LoadConfig(filepath.Join("..", "configs", "qwen3-8b.yaml"), sets)
	if err != nil {
		t.Fatal(err)
	}
	got["qwen3-8b.yaml --set "+strings.Join(sets, " ")] = configSettings(t, c, dir)
	d, err := ParseConfig(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.Model.Path, d.Data.Train, d.Retriever.Index = "m", []string{"t.jsonl"}, "i"
	d.APS.Enabled = false
	got["defaults"] = configSettings(t, d, dir)

	b, err := json.MarshalIndent(got, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "configs.golden.json")
	if *updateConfigGolden {
		if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var w map[string]any
	if err := json.Unmarshal(testfile.Read(t, golden), &w); err != nil {
		t.Fatal(err)
	}
	for name, g := range got {
		gb, _ := json.MarshalIndent(g, "", " ")
		wb, _ := json.MarshalIndent(w[name], "", " ")
		if string(gb) != string(wb) {
			t.Errorf("%s: settings changed\n got %s\nwant %s", name, gb, wb)
		}
	}
	if len(w) != len(got) {
		t.Errorf("%d golden entries, %d computed", len(w), len(got))
	}
}
