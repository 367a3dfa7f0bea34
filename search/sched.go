package search

import (
	"context"
	"slices"
	"sync"
)

// fairQueue holds the requests waiting for retrieval and hands their
// queries to workers by least attained service: each batch takes first the
// requests that have had the fewest queries handed out so far. A small
// request (at most largeResults results) is taken whole; a large one gives
// a slice of at most chunk results (queries × topk) per batch, in at most maxLarge batches
// at once, and is not mixed into a batch of smaller topk. A request of a
// thousand queries is thus served a slice at a time, interleaved with every
// other request, and a new small request goes ahead of it: it waits for at
// most the batches already running.
type fairQueue struct {
	chunk, maxBatch, maxJobs int // chunk: results of large requests per batch
	// maxLarge batches holding large slices run at once (the others hold
	// only requests of at most chunk queries), so that CPU-bound work on
	// large requests leaves a core to the small ones.
	maxLarge     int
	large        int // batches with large slices running
	largeResults int // a request asking more results (queries × topk) is large
	starved      bool

	mu     sync.Mutex
	ring   []*retrieveJob // jobs with queries not yet handed out, in arrival order
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

func newFairQueue(chunk, maxBatch, maxJobs, maxLarge, largeResults int) *fairQueue {
	return &fairQueue{chunk: chunk, maxBatch: maxBatch, maxJobs: maxJobs, maxLarge: maxLarge, largeResults: largeResults,
		wake: make(chan struct{}, 1)}
}

// isLarge says whether j asks more than largeResults results.
func (q *fairQueue) isLarge(j *retrieveJob) bool { return len(j.queries)*j.k > q.largeResults }

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

// take appends slices to batch, up to maxBatch queries (see fairQueue);
// large says whether the batch now holds a slice of a large request (the
// caller passes it back, and calls doneLarge after running such a batch).
// Jobs whose context is done are answered and dropped.
func (q *fairQueue) take(batch []slice, size int, large bool) ([]slice, int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := 0; i < len(q.ring); {
		if err := q.ring[i].ctx.Err(); err != nil {
			q.failLocked(q.ring[i], err)
			q.removeLocked(i)
			continue
		}
		i++
	}
	// Least attained service first; arrival order among equals. After a
	// take that left large requests waiting for a smaller topk, they go
	// first, so that with one worker they are not starved.
	order := slices.Clone(q.ring)
	slices.SortStableFunc(order, func(a, b *retrieveJob) int {
		if q.starved && q.isLarge(a) != q.isLarge(b) {
			if q.isLarge(a) {
				return -1
			}
			return 1
		}
		return a.handed - b.handed
	})
	q.starved = false
	largeBudget := 0
	if large || q.large < q.maxLarge {
		largeBudget = q.chunk
	}
	k := 0 // the batch retrieves its largest topk
	for _, s := range batch {
		k = max(k, s.job.k)
	}
	for _, j := range order {
		if size >= q.maxBatch {
			break
		}
		left := len(j.queries) - j.handed
		n := min(left, q.maxBatch-size)
		if q.isLarge(j) {
			// A slice of a large request, unless it would raise the topk
			// of small requests already in the batch (retrieval cost
			// grows with k).
			if k > 0 && j.k > k {
				q.starved = true
				continue
			}
			// At most chunk results of large requests per batch (at least
			// one query, when the batch has none yet).
			fit := largeBudget / j.k
			if fit == 0 && largeBudget == q.chunk {
				fit = 1
			}
			n = min(n, fit)
			largeBudget -= min(largeBudget, n*j.k)
			if n > 0 && !large {
				large = true
				q.large++
			}
		}
		if n == 0 {
			continue
		}
		k = max(k, j.k)
		batch = append(batch, slice{job: j, lo: j.handed, hi: j.handed + n})
		j.handed += n
		j.pending++
		size += n
		if j.handed == len(j.queries) {
			q.removeLocked(slices.Index(q.ring, j))
		}
	}
	if took := len(batch) > 0; took && len(q.ring) > 0 {
		// Work left for another worker. (Not after an empty take: what is
		// left waits for a large-batch slot, and doneLarge signals that;
		// signalling here would spin the idle workers.)
		q.signal()
	}
	return batch, size, large
}

// doneLarge ends a batch that held large slices.
func (q *fairQueue) doneLarge() {
	q.mu.Lock()
	q.large--
	q.mu.Unlock()
	q.signal()
}

func (q *fairQueue) removeLocked(i int) {
	q.ring = slices.Delete(q.ring, i, i+1)
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
