// Package textenum gives a small integer enum (values 0 … n−1, of an int
// or uint8 kind) its text form once: String, a case-insensitive Parse, and
// the encoding.TextMarshaler / TextUnmarshaler pair that JSON and YAML use,
// so that each enum's methods are one line each.
package textenum

import (
	"fmt"
	"strings"
)

// Names is the text form of an enum E: Names[i] is the name of E(i).
type Names[E ~int | ~uint8] struct {
	Type  string   // the Go type, for String of an invalid value: "ACIRule(7)"
	Kind  string   // what the value is, in errors: "ACI rule"
	Names []string // the names, in value order
	// Want lists the accepted names in errors ("plain, smoothed or ema");
	// empty: the names joined in value order.
	Want string
	// Aliases are further accepted spellings (lower case; "" makes an
	// empty text the given value), e.g. {"search-r1": TurnsPaper}.
	Aliases map[string]E
}

func (n Names[E]) valid(v E) bool { return v >= 0 && int(v) < len(n.Names) }

// String returns v's name, or Type(v) for a value out of range.
func (n Names[E]) String(v E) string {
	if n.valid(v) {
		return n.Names[v]
	}
	return fmt.Sprintf("%s(%d)", n.Type, int(v))
}

// Parse maps a name (case-insensitive, surrounding space ignored) to its
// value.
func (n Names[E]) Parse(name string) (E, error) {
	name = strings.TrimSpace(name)
	for i, s := range n.Names {
		if strings.EqualFold(name, s) {
			return E(i), nil
		}
	}
	if v, ok := n.Aliases[strings.ToLower(name)]; ok {
		return v, nil
	}
	return 0, fmt.Errorf("unknown %s %q (want %s)", n.Kind, name, n.want())
}

func (n Names[E]) want() string {
	if n.Want != "" {
		return n.Want
	}
	switch len(n.Names) {
	case 0:
		return "nothing"
	case 1:
		return n.Names[0]
	}
	return strings.Join(n.Names[:len(n.Names)-1], ", ") + " or " + n.Names[len(n.Names)-1]
}

// Marshal is MarshalText: v's name, an error for a value out of range.
func (n Names[E]) Marshal(v E) ([]byte, error) {
	if !n.valid(v) {
		return nil, fmt.Errorf("invalid %s %d", n.Kind, int(v))
	}
	return []byte(n.Names[v]), nil
}

// Unmarshal is UnmarshalText: it sets *v to the value named b.
func (n Names[E]) Unmarshal(b []byte, v *E) error {
	x, err := n.Parse(string(b))
	if err != nil {
		return err
	}
	*v = x
	return nil
}
