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
	return newBar(w, total, desc, progressbar.OptionShowBytes(true))
}

// NewCount returns an item-counting bar drawn on w (nil: silent).
func NewCount(w io.Writer, total int64, desc string) *Bar {
	return newBar(w, total, desc, progressbar.OptionShowCount(), progressbar.OptionShowIts())
}

// newBar draws a bar of total units on w with the units' options, redrawn
// at most every 200 ms, with a predicted time left and a newline at the end.
func newBar(w io.Writer, total int64, desc string, units ...progressbar.Option) *Bar {
	if w == nil {
		return &Bar{}
	}
	opts := append([]progressbar.Option{progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(desc)}, units...)
	return &Bar{bar: progressbar.NewOptions64(total, append(opts,
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionOnCompletion(func() { io.WriteString(w, "\n") }),
	)...)}
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
