package guard

import (
	"errors"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	sentinel := errors.New("plain error")
	tests := []struct {
		name string
		fn   func() error
		want string // substring of the error; "" means nil
	}{
		{"ok", func() error { return nil }, ""},
		{"error passes through", func() error { return sentinel }, "plain error"},
		{"slice bounds", func() error {
			b := make([]byte, 196)
			i := len(b) + 24
			_ = b[220-24 : i]
			return nil
		}, "data.parquet: corrupt or unsupported data (the parser failed: runtime error: slice bounds out of range"},
		{"panic value", func() error { panic("bad page") }, "data.parquet: corrupt or unsupported data (the parser failed: bad page)"},
	}
	for _, tc := range tests {
		err := Run("data.parquet", tc.fn)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	var ce *CorruptError
	if err := Run("x", func() error { panic(1) }); !errors.As(err, &ce) || ce.Name != "x" {
		t.Errorf("error %v is not a *CorruptError for x", err)
	}
	v, err := Value("y", func() (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Errorf("Value = %d, %v", v, err)
	}
	if _, err := Value("y", func() (int, error) { var m map[string]int; m["a"] = 1; return 0, nil }); err == nil {
		t.Error("Value: panic not recovered")
	}
}
