package demo

import (
	"bytes"
	"context"
	"strings"
	"sync"
)

// cancelOn is a log writer that cancels a context at the first line
// containing a marker, so a test can interrupt a run at a chosen point.
type cancelOn struct {
	mu     sync.Mutex
	marker string
	cancel context.CancelFunc
	hit    bool
	buf    bytes.Buffer
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if !c.hit && strings.Contains(c.buf.String(), c.marker) {
		c.hit = true
		c.cancel()
	}
	return len(p), nil
}
