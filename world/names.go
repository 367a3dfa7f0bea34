package world

import (
	"math/rand/v2"
	"strings"
)

// Syllable inventory of the world's names. A syllable is onset + vowel +
// coda; names of one to three syllables look like "Tarsk", "Velmora" or
// "Dalmor Keswin". The inventory is small so that the tokenizer learns the
// syllables as tokens.
var (
	onsets = []string{"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v"}
	vowels = []string{"a", "e", "i", "o", "u", "a", "e", "o"}
	codas  = []string{"", "", "", "", "n", "r", "s"}
)

const vowelLetters = "aeiou"

// syllable draws one syllable.
func syllable(r *rand.Rand) string {
	return onsets[r.IntN(len(onsets))] + vowels[r.IntN(len(vowels))] + codas[r.IntN(len(codas))]
}

// word draws n syllables and capitalises the result.
func word(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(syllable(r))
	}
	return capitalize(b.String())
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// mutateVowel returns s with one vowel of its first word replaced by another
// vowel: the near-identical name of a distractor ("Keswin" → "Keswen"). ok
// is false when the first word has no vowel.
func mutateVowel(r *rand.Rand, s string) (string, bool) {
	end := strings.IndexByte(s, ' ')
	if end < 0 {
		end = len(s)
	}
	var pos []int
	for i := 0; i < end; i++ {
		if strings.IndexByte(vowelLetters, s[i]) >= 0 {
			pos = append(pos, i)
		}
	}
	if len(pos) == 0 {
		return "", false
	}
	i := pos[r.IntN(len(pos))]
	v := vowelLetters[r.IntN(len(vowelLetters))]
	for v == s[i] {
		v = vowelLetters[r.IntN(len(vowelLetters))]
	}
	return s[:i] + string(v) + s[i+1:], true
}

// English word lists for titles of films, books and bands. Titles are not
// facts, so they may be readable; the facts about them are not guessable.
var (
	titleAdjectives = []string{
		"Silent", "Crimson", "Hollow", "Golden", "Broken", "Distant", "Quiet", "Burning",
		"Frozen", "Hidden", "Last", "Lonely", "Northern", "Pale", "Restless", "Scarlet",
		"Shining", "Sleeping", "Stolen", "Sunken", "Wandering", "White", "Wild", "Winter",
		"Bitter", "Bright", "Dark", "Endless", "Fallen", "Iron", "Lost", "Secret",
	}
	titleNouns = []string{
		"Harbor", "River", "Garden", "Mirror", "Tower", "Orchard", "Lantern", "Bridge",
		"Crown", "Valley", "Shadow", "Island", "Letter", "Summer", "Forest", "Station",
		"Window", "Season", "Meadow", "Voyage", "Kingdom", "Promise", "Harvest", "Compass",
		"Signal", "Ember", "Horizon", "Stranger", "Thread", "Winter", "Fortune", "Citadel",
	}
	bandNouns = []string{
		"Wolves", "Ravens", "Sparrows", "Tides", "Lanterns", "Engines", "Foxes", "Comets",
		"Pilots", "Echoes", "Shadows", "Hounds", "Rivers", "Saints", "Strangers", "Owls",
	}
	filmGenres   = []string{"drama", "comedy", "thriller", "western", "musical", "war", "science fiction", "mystery"}
	bandGenres   = []string{"rock", "folk", "jazz", "punk", "pop", "blues", "metal", "soul"}
	reviewWords  = []string{"mixed", "warm", "poor", "glowing", "lukewarm"}
	otherJobs    = []string{"painter", "chemist", "architect", "poet", "engineer", "historian", "sculptor", "physician", "botanist", "journalist"}
	countryTails = []struct{ name, demonym string }{{"ia", "ian"}, {"a", "an"}, {"land", "ish"}, {"or", "oran"}}
	langTails    = []string{"ic", "ese", "ish", "i"}
	citySuffixes = []string{"", "", "", "", "ford", "holm", "grad", "port", "vik", "dale", "mouth"}
)

// industry pairs a company's line of business with the word its name ends in.
type industry struct{ name, suffix string }

var industries = []industry{
	{"shipping", "Shipping"}, {"textile", "Textiles"}, {"software", "Systems"}, {"food", "Foods"},
	{"mining", "Mining"}, {"car", "Motors"}, {"pharmaceutical", "Pharma"}, {"publishing", "Press"},
	{"aircraft", "Aero"}, {"energy", "Energy"}, {"brewing", "Breweries"}, {"steel", "Steelworks"},
}

// pick returns a uniformly random element of xs.
func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }
