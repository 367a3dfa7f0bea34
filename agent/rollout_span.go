package agent

import "sort"

// TokenSpan maps the byte range [start, end) of text = tok.Decode(ids, true)
// onto token positions: it returns [lo, hi), the tokens whose decoded bytes
// overlap the range. It binary-searches the decoded length of prefixes,
//
//	P(i) = |common prefix of Decode(ids[:i]) and text|,
//
// which is non-decreasing in i for a prefix-consistent decoder (a token
// splitting a UTF-8 character counts from the token completing it):
// lo = min{i : P(i+1) > start}, hi = min{i : P(i) ≥ end}. This costs
// O(n log n) decoding, where decoding every prefix would cost O(n²).
func TokenSpan(tok Tokenizer, ids []int, text string, start, end int) (lo, hi int) {
	n := len(ids)
	if start < 0 || end > len(text) || start >= end || n == 0 {
		return 0, 0
	}
	prefix := func(i int) int {
		d := tok.Decode(ids[:i], true)
		k := 0
		for k < len(d) && k < len(text) && d[k] == text[k] {
			k++
		}
		return k
	}
	lo = sort.Search(n, func(i int) bool { return prefix(i+1) > start })
	hi = lo + sort.Search(n-lo+1, func(j int) bool { return prefix(lo+j) >= end })
	return lo, min(hi, n)
}
