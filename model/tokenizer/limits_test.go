package tokenizer

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLimits: a token over MaxTokenBytes is refused at load naming it and
// the limit; a word over MaxWordBytes is encoded in pieces, in time and
// memory linear in its length, with the same ids as encoding the pieces.
func TestLimits(t *testing.T) {
	base := map[string]any{}
	if err := json.Unmarshal(smallBPE(t, true), &base); err != nil {
		t.Fatal(err)
	}
	withAdded := func(content string) []byte {
		m := maps(base)
		m["added_tokens"] = []any{map[string]any{"id": 1000, "content": content, "special": true}}
		b, _ := json.Marshal(m)
		return b
	}
	big := strings.Repeat("x", 1<<20)
	if _, err := Parse(withAdded(big)); err == nil || !strings.Contains(err.Error(), "added_tokens[0] (id 1000) is 1048576 bytes, over the 4096-byte limit") {
		t.Fatalf("1 MB added token: %v", err)
	}
	if _, err := ParseWith(withAdded(big), Limits{MaxTokenBytes: 2 << 20}); err != nil {
		t.Fatalf("1 MB added token with a 2 MB limit: %v", err)
	}

	tok, err := ParseWith(smallBPE(t, true), Limits{MaxTokenBytes: 4096, MaxWordBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	word := strings.Repeat("abé", 700) // 2,800 bytes, one word
	var want []int
	for _, piece := range []string{word[:1000], word[1000:2000], word[2000:]} {
		if !strings.HasPrefix(piece, "a") && !strings.HasPrefix(piece, "b") && !strings.HasPrefix(piece, "é") {
			t.Fatal("test pieces not at character boundaries")
		}
		want = tok.model.tokenize(piece, want)
	}
	if got := tok.Encode(word); !slices.Equal(got, want) {
		t.Fatalf("a 2,800-byte word is not encoded as its 1,000-byte pieces")
	}
	// A 2 MB word (one id per byte with this vocabulary): with the default
	// limits the live heap stays proportional to the text, dominated by the
	// []int of ids; merged whole it peaks about twice as high.
	huge := strings.Repeat("ab", 1<<20)
	peaks := map[int]uint64{}
	for _, limit := range []int{DefaultLimits().MaxWordBytes, 0} {
		tok, err := ParseWith(smallBPE(t, true), Limits{MaxTokenBytes: 4096, MaxWordBytes: limit})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var ids []int
		peak := heapPeak(func() { ids = tok.Encode(huge) })
		peaks[limit] = peak
		t.Logf("2 MB word, MaxWordBytes %d: %d ids in %v, heap peak %d MB over the start", limit, len(ids), time.Since(start), peak>>20)
	}
	chunked, whole := peaks[DefaultLimits().MaxWordBytes], peaks[0]
	if chunked > 48*uint64(len(huge)) || chunked >= whole {
		t.Errorf("2 MB word: heap peak %d MB in pieces, %d MB whole; want ≤ 48 bytes per input byte and below whole", chunked>>20, whole>>20)
	}
}

// heapPeak runs fn and returns the largest live heap seen (sampled every
// millisecond) above the heap at the start. HeapAlloc counts garbage not yet
// collected too, up to GOGC% of the live heap depending on when the GC runs,
// so fn runs with GOGC at 10 to keep the sample close to the live heap.
func heapPeak(fn func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		var m runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > base && m.HeapAlloc-base > peak.Load() {
				peak.Store(m.HeapAlloc - base)
			}
		}
	}()
	fn()
	close(done)
	<-stopped
	return peak.Load()
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
