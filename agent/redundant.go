package agent

// RedundantSearches counts the searches of one trajectory that could not
// have told the agent anything new (the paper's "redundant searches",
// Table 2 and §4.3): a search whose query repeats an earlier query of the
// same trajectory (compared after NormalizeAnswer: case, punctuation,
// articles and whitespace ignored), or whose kept passages had all been
// shown already by earlier searches of the trajectory. A search that kept
// no passage is counted only by the first rule.
func RedundantSearches(calls []SearchCall) int {
	queries := map[string]bool{}
	shown := map[string]bool{}
	n := 0
	for _, c := range calls {
		q := NormalizeAnswer(c.Query)
		seen := len(c.Kept) > 0
		for _, id := range c.Kept {
			if !shown[id] {
				seen = false
			}
		}
		if queries[q] || seen {
			n++
		}
		queries[q] = true
		for _, id := range c.Kept {
			shown[id] = true
		}
	}
	return n
}
