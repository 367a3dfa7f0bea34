package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestScaleReportProjection: two sizes give a projection whose linear
// figures follow the measured slope; one size gives none (a single point
// fixes no slope, and repeating the measured figures as 21M's would
// mislead).
func TestScaleReportProjection(t *testing.T) {
	row := func(n int, build float64) ScaleRow {
		return ScaleRow{N: n, Config: "flat-f16", BuildS: build, IndexBytes: int64(n) * 1536,
			ServePeak: int64(n) * 1536, SingleMs: float64(n) / 1e4, BatchQPS: 1e8 / float64(n), Recall10: 1}
	}
	for _, tc := range []struct {
		name     string
		rows     []ScaleRow
		want     string
		wantNone bool
	}{
		{"two sizes", []ScaleRow{row(1_000_000, 10), row(2_000_000, 20)}, "#### Projection to 21M", false},
		{"one size", []ScaleRow{row(4_000_000, 40)}, "No projection to 21M", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &ScaleReport{Rows: tc.rows, Threads: 2}
			var buf bytes.Buffer
			r.WriteMarkdown(&buf)
			out := buf.String()
			if !strings.Contains(out, tc.want) || strings.Contains(out, "\n| flat-f16 |") == tc.wantNone {
				t.Fatalf("output:\n%s", out)
			}
			if tc.wantNone {
				return
			}
			p := r.Project("flat-f16", ScaleTarget)
			if p.BuildS < 209 || p.BuildS > 211 || p.SingleMs < 2099 || p.SingleMs > 2101 {
				t.Fatalf("projection %+v, want build 210 s and single 2100 ms", p)
			}
		})
	}
}
