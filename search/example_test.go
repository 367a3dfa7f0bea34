package search_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/cas-engine/cas/search"
)

func ExampleSplitContents() {
	title, text := search.SplitContents("\"Evan Morris\"\nEvan L. Morris was a lobbyist.")
	fmt.Printf("%q %q\n", title, text)
	// Output: "Evan Morris" "Evan L. Morris was a lobbyist."
}

func ExampleBM25Builder() {
	a, _ := search.NewAnalyzer(search.DefaultAnalyzerSettings())
	b, _ := search.NewBM25Builder(a, search.DefaultBM25Params())
	for _, doc := range []string{"the quick brown fox", "quick quick dog", "lazy brown dogs sleep"} {
		b.AddText(doc)
	}
	ix := b.Finish()
	for _, r := range ix.Search("quick dog", 3) {
		fmt.Printf("row %d score %.4f\n", r.Row, r.Score)
	}
	// Output:
	// row 1 score 0.5804
	// row 0 score 0.2521
	// row 2 score 0.2383
}

// staticRetriever answers every query with one fixed passage.
type staticRetriever struct{}

func (staticRetriever) Retrieve(_ context.Context, queries []string, k int) ([][]search.Hit, error) {
	out := make([][]search.Hit, len(queries))
	for i := range out {
		out[i] = []search.Hit{{Doc: search.Doc{ID: "42", Contents: "\"Paris\"\nParis is the capital of France."}, Score: 0.83}}
	}
	return out, nil
}

func ExampleServer() {
	srv, _ := search.NewServer(staticRetriever{}, search.DefaultServerConfig())
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	hits, err := search.NewClient(ts.URL).Retrieve(context.Background(), []string{"capital of France"}, 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	h := hits[0][0]
	fmt.Println(h.Doc.ID, h.Doc.Title, h.Score)
	// Output: 42 Paris 0.83
}
