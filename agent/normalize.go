package agent

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// NormalizeAnswer is the SQuAD/Search-R1 answer normalisation used by the
// exact-match reward (paper Eq. 5) and by every EM number in the evaluation:
//
//	normalize(s) = white_space_fix(remove_articles(remove_punc(lower(s))))
//
// step by step, as Python's reference does it:
//   - lower: Unicode full lowercase mapping, as Python's str.lower (U+0130 → "i̇",
//     capital sigma → final sigma ς at the end of a word, simple mapping otherwise);
//   - remove_punc: delete every character of Python's string.punctuation, the
//     32 ASCII punctuation characters !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~;
//   - remove_articles: re.sub(r"\b(a|an|the)\b", " ", s), where \b is Python's
//     Unicode word boundary (a word character is a letter, a number or '_');
//   - white_space_fix: " ".join(s.split()), splitting on Python's Unicode
//     whitespace (str.isspace).
//
// Examples: "The  Beatles!" → "beatles"; "U.S.A." → "usa"; "an apple a day" → "apple day".
func NormalizeAnswer(s string) string {
	s = pyLower(s)
	s = removePunc(s)
	s = removeArticles(s)
	return whiteSpaceFix(s)
}

// ExactMatch reports whether normalize(pred) equals normalize(g) for any gold
// answer g (Search-R1's em_check). With no gold answers it is false.
func ExactMatch(pred string, golds []string) bool {
	p := NormalizeAnswer(pred)
	for _, g := range golds {
		if NormalizeAnswer(g) == p {
			return true
		}
	}
	return false
}

// asciiPunct reports whether r is in Python's string.punctuation.
func asciiPunct(r rune) bool {
	return r < 0x80 && strings.ContainsRune(`!"#$%&'()*+,-./:;<=>?@[\]^_`+"`"+`{|}~`, r)
}

func removePunc(s string) string {
	return strings.Map(func(r rune) rune {
		if asciiPunct(r) {
			return -1
		}
		return r
	}, s)
}

// isPySpace is Python's str.isspace: Go's unicode.IsSpace plus the four
// ASCII separators U+001C..U+001F, which Python also splits on.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip is Python's str.strip() with no argument.
func pyStrip(s string) string {
	return strings.TrimFunc(s, isPySpace)
}

func whiteSpaceFix(s string) string {
	return strings.Join(strings.FieldsFunc(s, isPySpace), " ")
}

// isPyWord is the word-character class of Python's re module on str
// patterns: alphanumeric (letters and numbers of every script) or '_'.
func isPyWord(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
}

// removeArticles replaces every maximal word-character run that is exactly
// "a", "an" or "the" by a single space, which is what
// re.sub(r"\b(a|an|the)\b", " ", s) does: \b matches only at the edges of a
// word run, so the article must be a whole run.
func removeArticles(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	i := 0
	for i < len(s) {
		r, size := decodeRune(s, i)
		if !isPyWord(r) {
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		j := i
		for j < len(s) {
			r2, size2 := decodeRune(s, j)
			if !isPyWord(r2) {
				break
			}
			j += size2
		}
		switch s[i:j] {
		case "a", "an", "the":
			b.WriteByte(' ')
		default:
			b.WriteString(s[i:j])
		}
		i = j
	}
	return b.String()
}

// pyLower is Python's str.lower: the simple lowercase mapping except for the
// two unconditional or language-independent special cases of Unicode's
// SpecialCasing.txt: U+0130 → "i\u0307" and the Final_Sigma rule.
func pyLower(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	rs := []rune(s)
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range rs {
		switch {
		case r < 0x80:
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			b.WriteRune(r)
		case r == 0x130:
			b.WriteString("i\u0307")
		case r == 0x3a3:
			if finalSigma(rs, i) {
				b.WriteRune(0x3c2)
			} else {
				b.WriteRune(0x3c3)
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma is Unicode's Final_Sigma condition at rs[i] (Python's
// handle_capital_sigma): \p{cased}\p{case-ignorable}* Σ !(\p{case-ignorable}* \p{cased}).
func finalSigma(rs []rune, i int) bool {
	j := i - 1
	for j >= 0 && caseIgnorable(rs[j]) {
		j--
	}
	if j < 0 || !cased(rs[j]) {
		return false
	}
	j = i + 1
	for j < len(rs) && caseIgnorable(rs[j]) {
		j++
	}
	return j == len(rs) || !cased(rs[j])
}

// cased is Unicode's Cased property: Lu, Ll, Lt, Other_Lowercase, Other_Uppercase.
func cased(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) ||
		unicode.Is(unicode.Other_Lowercase, r) || unicode.Is(unicode.Other_Uppercase, r)
}

// caseIgnorable is Unicode's Case_Ignorable property: Mn, Me, Cf, Lm, Sk, or
// Word_Break ∈ {MidLetter, MidNumLet, Single_Quote}.
func caseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', 0xb7, 0x387, 0x55f, 0x5f4, 0x2018, 0x2019, 0x2024, 0x2027,
		0xfe13, 0xfe52, 0xfe55, 0xff07, 0xff0e, 0xff1a:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}

// decodeRune decodes the rune at byte offset i; invalid UTF-8 yields
// utf8.RuneError with size 1, so bytes are never lost.
func decodeRune(s string, i int) (rune, int) {
	return utf8.DecodeRuneInString(s[i:])
}
