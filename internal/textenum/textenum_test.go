package textenum

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/wanterr"
)

type color int

var colorNames = Names[color]{Type: "color", Kind: "color", Names: []string{"red", "green", "blue"}}

func (c color) String() string                { return colorNames.String(c) }
func (c color) MarshalText() ([]byte, error)  { return colorNames.Marshal(c) }
func (c *color) UnmarshalText(b []byte) error { return colorNames.Unmarshal(b, c) }

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want color
		err  string
	}{
		{"red", 0, ""},
		{" Blue ", 2, ""},
		{"GREEN", 1, ""},
		{"teal", 0, `unknown color "teal" (want red, green or blue)`},
		{"", 0, "unknown color"},
	} {
		got, err := colorNames.Parse(tc.in)
		if wanterr.Check(t, "Parse("+tc.in+")", err, tc.err) {
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if s := color(5).String(); s != "color(5)" {
		t.Errorf("String of an invalid value = %q", s)
	}
	if _, err := json.Marshal(color(-1)); err == nil || !strings.Contains(err.Error(), "invalid color -1") {
		t.Errorf("marshal of an invalid value: %v", err)
	}
	var v struct{ C []color }
	if err := json.Unmarshal([]byte(`{"C":["blue","red"]}`), &v); err != nil || len(v.C) != 2 || v.C[0] != 2 || v.C[1] != 0 {
		t.Fatalf("unmarshal: %v, %v", v, err)
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) != `{"C":["blue","red"]}` {
		t.Errorf("round trip: %s, %v", b, err)
	}
	if err := json.Unmarshal([]byte(`{"C":["pink"]}`), &v); err == nil {
		t.Error("unknown name accepted")
	}
	w := Names[color]{Kind: "c", Names: []string{"a", "b"}, Want: "b or a"}
	if _, err := w.Parse("x"); err == nil || !strings.Contains(err.Error(), "(want b or a)") {
		t.Errorf("Want not used: %v", err)
	}
}

// TestAliases: further spellings, the empty text among them, map to their
// values; names still win and unknown text is still refused.
func TestAliases(t *testing.T) {
	n := Names[color]{Kind: "color", Names: []string{"red", "green", "blue"}, Aliases: map[string]color{"": 0, "navy": 2}}
	for in, want := range map[string]color{"": 0, "  ": 0, "Navy": 2, "green": 1} {
		if got, err := n.Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := n.Parse("teal"); err == nil || !strings.Contains(err.Error(), "(want red, green or blue)") {
		t.Errorf("unknown spelling: %v", err)
	}
}

// TestUint8Kind: a uint8 enum gets the same String, Parse and text
// round trip, and an out-of-range value prints with its type.
func TestUint8Kind(t *testing.T) {
	type small uint8
	n := Names[small]{Type: "small", Kind: "small", Names: []string{"a", "b"}, Aliases: map[string]small{"bee": 1}}
	if got, err := n.Parse(" BEE "); err != nil || got != 1 {
		t.Errorf("Parse alias = %v, %v", got, err)
	}
	if s := n.String(200); s != "small(200)" {
		t.Errorf("String(200) = %q", s)
	}
	if _, err := n.Marshal(2); err == nil || !strings.Contains(err.Error(), "invalid small 2") {
		t.Errorf("Marshal(2): %v", err)
	}
	var v small
	if err := n.Unmarshal([]byte("b"), &v); err != nil || v != 1 {
		t.Errorf("Unmarshal(b) = %v, %v", v, err)
	}
}
