package search

// Test helpers for the external tests of package search_test (abuse_test.go,
// which drives the server with bench's load generator; bench imports search,
// so that test cannot live inside the package).
var (
	ServeLoopback = serveLoopback
	ReadQA        = readQA
	LowPriority   = lowPriority
)

// BigRetriever answers every query with k hits of size bytes of contents.
func BigRetriever(size int) Retriever { return bigRetriever{size: size} }
