package search

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// retrievalBar is a progress bar that counts bytes or items; a nil writer
// gives a silent bar so library callers and tests stay quiet.
type retrievalBar struct {
	bar *progressbar.ProgressBar
}

// newRetrievalBar returns a byte-counting bar drawn on w (nil: silent).
func newRetrievalBar(w io.Writer, total int64, desc string) *retrievalBar {
	if w == nil {
		return &retrievalBar{}
	}
	return &retrievalBar{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionOnCompletion(func() { io.WriteString(w, "\n") }),
	)}
}

// newRetrievalCountBar returns an item-counting bar drawn on w (nil: silent).
func newRetrievalCountBar(w io.Writer, total int64, desc string) *retrievalBar {
	if w == nil {
		return &retrievalBar{}
	}
	return &retrievalBar{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionOnCompletion(func() { io.WriteString(w, "\n") }),
	)}
}

// Write advances the bar by len(p) (it is an io.Writer for io.TeeReader).
func (b *retrievalBar) Write(p []byte) (int, error) {
	if b.bar != nil {
		b.bar.Add(len(p))
	}
	return len(p), nil
}

// Add advances the bar by n items.
func (b *retrievalBar) Add(n int) {
	if b.bar != nil {
		b.bar.Add(n)
	}
}

// Finish completes the bar.
func (b *retrievalBar) Finish() {
	if b.bar != nil {
		b.bar.Finish()
	}
}
