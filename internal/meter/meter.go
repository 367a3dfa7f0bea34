// Package meter draws the retrieval side's progress bars (bytes or items)
// on a writer, silent when the writer is nil.
package meter

import (
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Bar is a progress bar that counts bytes or items; a nil writer
// gives a silent bar so library callers and tests stay quiet.
type Bar struct {
	bar *progressbar.ProgressBar
}

// NewBytes returns a byte-counting bar drawn on w (nil: silent).
func NewBytes(w io.Writer, total int64, desc string) *Bar {
	if w == nil {
		return &Bar{}
	}
	return &Bar{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionOnCompletion(func() { io.WriteString(w, "\n") }),
	)}
}

// NewCount returns an item-counting bar drawn on w (nil: silent).
func NewCount(w io.Writer, total int64, desc string) *Bar {
	if w == nil {
		return &Bar{}
	}
	return &Bar{bar: progressbar.NewOptions64(total,
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
func (b *Bar) Write(p []byte) (int, error) {
	if b.bar != nil {
		b.bar.Add(len(p))
	}
	return len(p), nil
}

// Add advances the bar by n items.
func (b *Bar) Add(n int) {
	if b.bar != nil {
		b.bar.Add(n)
	}
}

// Finish completes the bar.
func (b *Bar) Finish() {
	if b.bar != nil {
		b.bar.Finish()
	}
}
