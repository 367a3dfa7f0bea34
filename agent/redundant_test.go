package agent

import "testing"

func TestRedundantSearches(t *testing.T) {
	sc := func(q string, kept ...string) SearchCall { return SearchCall{Query: q, Kept: kept} }
	for _, tc := range []struct {
		name  string
		calls []SearchCall
		want  int
	}{
		{"none", nil, 0},
		{"one search", []SearchCall{sc("who founded acme", "p1", "p2")}, 0},
		{"two new hops", []SearchCall{sc("who founded acme", "p1"), sc("where was bo born", "p7")}, 0},
		{"repeated query, new passages", []SearchCall{sc("Who founded Acme?", "p1"), sc("who founded  the acme", "p9")}, 1},
		{"new query, all passages seen", []SearchCall{sc("acme founder", "p1", "p2"), sc("founder of acme", "p2", "p1")}, 1},
		{"new query, one new passage", []SearchCall{sc("acme founder", "p1", "p2"), sc("founder of acme", "p2", "p3")}, 0},
		{"both rules at once count once", []SearchCall{sc("acme", "p1"), sc("acme", "p1")}, 1},
		{"three repeats", []SearchCall{sc("acme", "p1"), sc("acme", "p2"), sc("ACME", "p3"), sc("bo", "p4")}, 2},
		{"empty kept counts only by query", []SearchCall{sc("acme"), sc("bo"), sc("bo")}, 1},
	} {
		if got := RedundantSearches(tc.calls); got != tc.want {
			t.Errorf("%s: got %d redundant searches, want %d", tc.name, got, tc.want)
		}
	}
}
