package agent

import (
	"sort"
	"strings"
	"unicode"
)

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
	prefix := decodedPrefix(tok, ids, text)
	lo = sort.Search(n, func(i int) bool { return prefix(i+1) > start })
	hi = lo + sort.Search(n-lo+1, func(j int) bool { return prefix(lo+j) >= end })
	return lo, min(hi, n)
}

// AnswerTokenSpan maps the content [start, end) of an <answer>…</answer>
// (AnswerSpan's byte range in text = tok.Decode(ids, true)) onto the tokens
// paper Eq. 6 averages over: the tokens strictly inside the tags. With P as
// in TokenSpan and [start', end') the content with surrounding whitespace
// trimmed, it keeps the tokens whose decoded bytes lie entirely inside the
// content and that hold at least one byte of the trimmed answer:
//
//	lo = min{i : P(i) ≥ start, P(i+1) > start'},   hi = max{i : P(i) ≤ end, P(i−1) < end'}.
//
// With the Qwen3 tokenizer, "<answer> Paris </answer>" scores [" Paris"]
// (not the " </" fragment of the closing tag) and "<answer>\nParis\n</answer>"
// scores ["Paris"] (not ">\n" or the closing "\n"); a token merging a tag
// with the answer (">S" of "<answer>São") is not scored. An empty or
// whitespace-only answer, or one no token lies entirely inside, gives an
// empty span: the ACI score then falls back to the mean NLL of every
// generated token (conformal.AnswerNLL; the official code's fallback).
func AnswerTokenSpan(tok Tokenizer, ids []int, text string, start, end int) (lo, hi int) {
	n := len(ids)
	if start < 0 || end > len(text) || start >= end || n == 0 {
		return 0, 0
	}
	inner := text[start:end]
	trimmed := strings.TrimLeftFunc(inner, unicode.IsSpace)
	ts := start + len(inner) - len(trimmed)
	te := ts + len(strings.TrimRightFunc(trimmed, unicode.IsSpace))
	if ts >= te {
		return 0, 0
	}
	prefix := decodedPrefix(tok, ids, text)
	lo = sort.Search(n+1, func(i int) bool { return prefix(i) >= start })
	hi = sort.Search(n+1, func(i int) bool { return prefix(i) > end }) - 1
	for lo < hi && prefix(lo+1) <= ts {
		lo++ // whitespace-only token before the answer
	}
	for hi > lo && prefix(hi-1) >= te {
		hi-- // whitespace-only token after it
	}
	if hi <= lo {
		return 0, 0
	}
	return lo, hi
}

// AnswerTokens finds the first <answer>…</answer> of text = tok.Decode(ids,
// true) and returns its tokens (AnswerTokenSpan); [0, 0) when there is none.
func AnswerTokens(tok Tokenizer, ids []int, text string) (lo, hi int) {
	start, end, ok := AnswerSpan(text)
	if !ok {
		return 0, 0
	}
	return AnswerTokenSpan(tok, ids, text, start, end)
}

// decodedPrefix returns P(i) = |common prefix of Decode(ids[:i]) and text|,
// the bytes of text the first i tokens account for.
func decodedPrefix(tok Tokenizer, ids []int, text string) func(i int) int {
	return func(i int) int {
		d := tok.Decode(ids[:i], true)
		k := 0
		for k < len(d) && k < len(text) && d[k] == text[k] {
			k++
		}
		return k
	}
}
