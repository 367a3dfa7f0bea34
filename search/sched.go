package search

import (
	"context"
	"sync"
)

// fairQueue holds the requests waiting for retrieval and hands their
// queries to workers in round-robin slices: each batch takes at most
// FairChunk queries from each waiting request in turn, so a request of a
// thousand queries is served a slice at a time, interleaved with every
// other request, and a one-query request waits for at most one slice of
// each request ahead of it instead of the whole of them.
type fairQueue struct {
	chunk, maxBatch, maxJobs int

	mu     sync.Mutex
	ring   []*retrieveJob // jobs with queries not yet handed out, in arrival order
	next   int            // ring position the next batch starts at
	jobs   int            // jobs accepted and not yet answered
	closed bool
	wake   chan struct{} // signalled (non-blocking, capacity 1) on every push
}

// retrieveJob is one request's queries in the queue.
type retrieveJob struct {
	ctx     context.Context
	queries []string
	k       int
	done    chan jobResult // buffered (1): workers never block on it

	// Guarded by the queue's mutex.
	handed  int     // queries handed to workers so far
	pending int     // slices handed out and not yet answered
	hits    [][]Hit // filled slice by slice
	err     error
	replied bool
}

type jobResult struct {
	hits [][]Hit
	err  error
}

// slice is a run of one job's queries inside a batch.
type slice struct {
	job    *retrieveJob
	lo, hi int
}

func newFairQueue(chunk, maxBatch, maxJobs int) *fairQueue {
	return &fairQueue{chunk: chunk, maxBatch: maxBatch, maxJobs: maxJobs, wake: make(chan struct{}, 1)}
}

// push enqueues j; it fails when the queue is closed or holds maxJobs.
func (q *fairQueue) push(j *retrieveJob) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closed:
		return errServerClosed
	case q.jobs >= q.maxJobs:
		return errOverloaded
	}
	j.hits = make([][]Hit, len(j.queries))
	q.ring = append(q.ring, j)
	q.jobs++
	q.signal()
	return nil
}

func (q *fairQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take appends to batch up to FairChunk queries of each waiting job in
// round-robin order, until the batch holds maxBatch queries or every job
// has had one turn. Jobs whose context is done are answered and dropped.
func (q *fairQueue) take(batch []slice, size int) ([]slice, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	visited := 0
	for len(q.ring) > 0 && size < q.maxBatch && visited < len(q.ring) {
		if q.next >= len(q.ring) {
			q.next = 0
		}
		j := q.ring[q.next]
		if err := j.ctx.Err(); err != nil {
			q.failLocked(j, err)
			q.removeLocked(q.next)
			continue
		}
		n := min(q.chunk, len(j.queries)-j.handed, q.maxBatch-size)
		batch = append(batch, slice{job: j, lo: j.handed, hi: j.handed + n})
		j.handed += n
		j.pending++
		size += n
		visited++
		if j.handed == len(j.queries) {
			q.removeLocked(q.next)
		} else {
			q.next++
		}
	}
	if len(q.ring) > 0 {
		q.signal() // work left for another worker
	}
	return batch, size
}

func (q *fairQueue) removeLocked(i int) {
	q.ring = append(q.ring[:i], q.ring[i+1:]...)
	if q.next > i {
		q.next--
	}
}

// failLocked answers j with err (once).
func (q *fairQueue) failLocked(j *retrieveJob, err error) {
	if !j.replied {
		j.replied = true
		q.jobs--
		j.done <- jobResult{err: err}
	}
}

// finish records the answer of one slice (hits of its queries, or err) and
// answers its job when every slice of it is in.
func (q *fairQueue) finish(s slice, hits [][]Hit, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	j := s.job
	j.pending--
	if err != nil && j.err == nil {
		j.err = err
	}
	if err == nil {
		copy(j.hits[s.lo:s.hi], hits)
	}
	if j.replied {
		return
	}
	if j.err != nil {
		// Stop handing out the rest of a failed job.
		for i, r := range q.ring {
			if r == j {
				q.removeLocked(i)
				break
			}
		}
		q.failLocked(j, j.err)
		return
	}
	if j.pending == 0 && j.handed == len(j.queries) {
		j.replied = true
		q.jobs--
		j.done <- jobResult{hits: j.hits}
	}
}

// close refuses new jobs and answers every waiting one with err.
func (q *fairQueue) close(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, j := range q.ring {
		q.failLocked(j, err)
	}
	q.ring = nil
}
