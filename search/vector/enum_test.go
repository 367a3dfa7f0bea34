package vector

import (
	"strings"
	"testing"
)

// TestMetricEncodingText: the names and aliases the index header and
// `cas index --metric/--encoding` accept, the names they print, and the
// error for an unknown one.
func TestMetricEncodingText(t *testing.T) {
	for in, want := range map[string]Metric{"ip": InnerProduct, "IP": InnerProduct, "inner_product": InnerProduct, "dot": InnerProduct, "l2": L2, "L2": L2} {
		if got, err := ParseMetric(in); err != nil || got != want {
			t.Errorf("ParseMetric(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]Encoding{"f32": F32, "float32": F32, "flat": F32, "F16": F16, "float16": F16, "fp16": F16, "sq8": SQ8} {
		if got, err := ParseEncoding(in); err != nil || got != want {
			t.Errorf("ParseEncoding(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseMetric("cosine"); err == nil || err.Error() != `unknown metric "cosine" (want ip or l2)` {
		t.Errorf("ParseMetric(cosine): %v", err)
	}
	if _, err := ParseEncoding("pq"); err == nil || err.Error() != `unknown encoding "pq" (want f32, f16 or sq8)` {
		t.Errorf("ParseEncoding(pq): %v", err)
	}
	got := strings.Join([]string{InnerProduct.String(), L2.String(), Metric(7).String(), F32.String(), F16.String(), SQ8.String(), Encoding(9).String()}, " ")
	if want := "ip l2 metric(7) f32 f16 sq8 encoding(9)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}
