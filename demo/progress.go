package demo

import (
	"io"

	"github.com/schollz/progressbar/v3"
)

// newBar is the progress bar of a long stage, on w (stderr in the CLI).
func newBar(w io.Writer, n int, what string) *progressbar.ProgressBar {
	return progressbar.NewOptions(n, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionFullWidth(), progressbar.OptionOnCompletion(func() { _, _ = io.WriteString(w, "\n") }))
}
