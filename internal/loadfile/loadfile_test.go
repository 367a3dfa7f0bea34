package loadfile

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/testfile"
)

var errOdd = errors.New("odd")

// parseEven reads a decimal integer and rejects odd ones.
func parseEven(b []byte) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err == nil && n%2 != 0 {
		return 0, errOdd
	}
	return n, err
}

func TestParse(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.txt")
	for _, tc := range []struct {
		name, content string
		want          int
		err           string // the whole error text; "" for none
		is            error
	}{
		{"even.txt", "42\n", 42, "", nil},
		{"odd.txt", "7", 0, "load " + filepath.Join(dir, "odd.txt") + ": odd", errOdd},
		{"word.txt", "x", 0, "load " + filepath.Join(dir, "word.txt") + `: strconv.Atoi: parsing "x": invalid syntax`, strconv.ErrSyntax},
	} {
		p := testfile.Write(t, dir, tc.name, []byte(tc.content))
		got, err := Parse(p, parseEven)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: got %d, %v; want %d", tc.name, got, err, tc.want)
		case tc.err != "" && (err == nil || err.Error() != tc.err || !errors.Is(err, tc.is) || got != 0):
			t.Errorf("%s: got %d, %v; want 0, %q", tc.name, got, err, tc.err)
		}
	}
	if _, err := Parse(missing, parseEven); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "load "+missing+": ") {
		t.Errorf("missing file: %v", err)
	}
}

func TestJSON(t *testing.T) {
	type rec struct {
		A int    `json:"a"`
		B string `json:"b"`
	}
	dir := t.TempDir()
	p := testfile.Write(t, dir, "ok.json", []byte(`{"a": 3, "b": "x", "extra": 1}`))
	if got, err := JSON[rec](p); err != nil || got != (rec{3, "x"}) {
		t.Errorf("got %+v, %v; want {3 x}", got, err)
	}
	bad := testfile.Write(t, dir, "bad.json", []byte(`{"a": "three"}`))
	if got, err := JSON[rec](bad); err == nil || !strings.HasPrefix(err.Error(), "load "+bad+": json: cannot unmarshal") || got != (rec{}) {
		t.Errorf("bad JSON: got %+v, %v", got, err)
	}
}
