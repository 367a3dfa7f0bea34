package main

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"sync"
	"time"

	"golang.org/x/term"
)

// plainProgressInterval is how often a progress bar on a non-terminal
// becomes a log line.
const plainProgressInterval = 5 * time.Second

// progressOut is where a command draws its progress bars: stderr itself on
// a terminal; otherwise (a log file, a pipe, a cluster job's output) a
// writer that turns the bars' carriage-return frames into one plain line
// every few seconds (description, count, rate, ETA), so logs hold lines,
// not thousands of \r frames.
func progressOut(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return w
	}
	return newPlainProgress(w, plainProgressInterval, time.Now)
}

// plainProgress rewrites progress-bar output (frames separated by '\r',
// ANSI clear-line codes) as lines: the latest frame is written when at
// least interval has passed since the previous line, and when the bar
// finishes (its '\n'). Text that is not a frame passes through.
type plainProgress struct {
	mu       sync.Mutex
	w        io.Writer
	interval time.Duration
	now      func() time.Time
	frame    []byte // the frame being drawn
	inFrame  bool   // a '\r' started the current text
	last     time.Time
	lastLine string
}

func newPlainProgress(w io.Writer, interval time.Duration, now func() time.Time) *plainProgress {
	return &plainProgress{w: w, interval: interval, now: now}
}

var ansiCSI = regexp.MustCompile("\x1b\\[[0-9;?]*[A-Za-z]")

func (p *plainProgress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	b = ansiCSI.ReplaceAll(b, nil)
	var out bytes.Buffer
	for len(b) > 0 {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			p.frame = append(p.frame, b...)
			break
		}
		p.frame = append(p.frame, b[:i]...)
		switch b[i] {
		case '\r':
			p.emitFrame(&out, false)
			p.inFrame = true
		case '\n':
			if p.inFrame {
				p.emitFrame(&out, true)
			} else {
				out.Write(p.frame)
				out.WriteByte('\n')
			}
			p.frame, p.inFrame = p.frame[:0], false
		}
		b = b[i+1:]
	}
	if out.Len() > 0 {
		if _, err := p.w.Write(out.Bytes()); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// emitFrame writes the finished frame as a line when due (or final), and
// starts a new one.
func (p *plainProgress) emitFrame(out *bytes.Buffer, final bool) {
	line := string(bytes.TrimSpace(p.frame))
	p.frame = p.frame[:0]
	if line == "" || line == p.lastLine {
		return
	}
	now := p.now()
	if !final && now.Sub(p.last) < p.interval {
		return
	}
	out.WriteString(line)
	out.WriteByte('\n')
	p.last, p.lastLine = now, line
}
