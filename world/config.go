package world

import (
	"errors"
	"fmt"
)

// Config sizes a world. The entity counts and NearDuplicateRate determine the
// corpus; the question counts and TwoHopFraction the splits; VocabSize and
// MinMergeFrequency the tokenizer. All of it is a function of Seed.
type Config struct {
	Seed uint64 `json:"seed"`

	Countries int `json:"countries"`
	Cities    int `json:"cities"`
	People    int `json:"people"`
	Films     int `json:"films"`
	Companies int `json:"companies"`
	Bands     int `json:"bands"`
	Books     int `json:"books"`
	// NearDuplicateRate is the probability that a new person, city, country
	// or company name is a one-vowel variant of an earlier one.
	NearDuplicateRate float64 `json:"near_duplicate_rate"`
	// MarriedFraction is the fraction of people who have a spouse.
	MarriedFraction float64 `json:"married_fraction"`

	// Questions per split.
	Train    int `json:"train"`
	APSCalib int `json:"aps_calib"`
	ACICalib int `json:"aci_calib"`
	Test     int `json:"test"`
	// GRPO is the number of questions of the GRPO split (0: none).
	GRPO int `json:"grpo,omitempty"`
	// TwoHopFraction is the share of two-hop bridge questions in each split.
	TwoHopFraction float64 `json:"two_hop_fraction"`

	// VocabSize is the tokenizer's total vocabulary: the 256 byte symbols,
	// the learned merges and the added tag tokens.
	VocabSize int `json:"vocab_size"`
	// MinMergeFrequency stops BPE training early when the most frequent pair
	// occurs fewer times than this.
	MinMergeFrequency int `json:"min_merge_frequency"`
}

// SplitSizes returns the requested number of questions per split, in
// split order.
func (c Config) SplitSizes() [NumSplits]int {
	return [NumSplits]int{Train: c.Train, APSCalib: c.APSCalib, ACICalib: c.ACICalib, Test: c.Test, GRPO: c.GRPO}
}

// DefaultConfig is the world of the default `make demo` run: about 2,800
// passages and 3,950 questions.
func DefaultConfig(seed uint64) Config {
	return Config{
		Seed:      seed,
		Countries: 24, Cities: 160, People: 900, Films: 300, Companies: 200, Bands: 120, Books: 220,
		NearDuplicateRate: 0.12, MarriedFraction: 0.35,
		Train: 3000, APSCalib: 300, ACICalib: 150, Test: 500,
		TwoHopFraction: 0.5,
		VocabSize:      1000, MinMergeFrequency: 2,
	}
}

// SmallConfig is the world of `cas demo --quick` and of the tests: about 580
// passages and 870 questions.
func SmallConfig(seed uint64) Config {
	c := DefaultConfig(seed)
	c.Countries, c.Cities, c.People, c.Films, c.Companies, c.Bands, c.Books = 8, 40, 170, 60, 40, 24, 44
	c.Train, c.APSCalib, c.ACICalib, c.Test = 600, 100, 60, 110
	c.VocabSize = 768
	return c
}

// ConfigForSize returns the preset named "small" or "default".
func ConfigForSize(size string, seed uint64) (Config, error) {
	switch size {
	case "small":
		return SmallConfig(seed), nil
	case "default", "":
		return DefaultConfig(seed), nil
	}
	return Config{}, fmt.Errorf("unknown world size %q (want small or default)", size)
}

// roleCounts is how many people take each role for the given config.
type roleCounts struct{ directors, actors, founders, singers, writers int }

func (c Config) roles() roleCounts {
	atLeast1 := func(n int) int { return max(1, n) }
	return roleCounts{
		directors: atLeast1(c.Films * 2 / 5),
		actors:    atLeast1(c.Films / 3),
		founders:  atLeast1(c.Companies * 3 / 4),
		singers:   c.Bands,
		writers:   atLeast1(c.Books / 2),
	}
}

// Validate reports every inconsistency of the config, joined.
func (c Config) Validate() error {
	var errs []error
	if c.Countries < 2 {
		errs = append(errs, fmt.Errorf("countries = %d, want >= 2", c.Countries))
	}
	if c.Cities < c.Countries {
		errs = append(errs, fmt.Errorf("cities = %d, want >= countries (%d): every country needs a capital", c.Cities, c.Countries))
	}
	if c.Films < 1 || c.Companies < 1 || c.Bands < 1 || c.Books < 1 {
		errs = append(errs, fmt.Errorf("films, companies, bands and books must each be >= 1 (got %d, %d, %d, %d)", c.Films, c.Companies, c.Bands, c.Books))
	}
	// Titles are "The <adjective> <noun>": the word lists bound the counts.
	if maxFilms := len(titleAdjectives) * len(titleNouns) * 7 / 8; c.Films > maxFilms {
		errs = append(errs, fmt.Errorf("films = %d, want <= %d (distinct titles)", c.Films, maxFilms))
	}
	if maxBands := len(titleAdjectives) * len(bandNouns) * 7 / 8; c.Bands > maxBands {
		errs = append(errs, fmt.Errorf("bands = %d, want <= %d (distinct names)", c.Bands, maxBands))
	}
	rc := c.roles()
	if need := rc.directors + rc.actors + rc.founders + rc.singers + rc.writers + 2; c.People < need {
		errs = append(errs, fmt.Errorf("people = %d, want >= %d to fill the directors, actors, founders, singers and writers", c.People, need))
	}
	if c.NearDuplicateRate < 0 || c.NearDuplicateRate > 0.5 {
		errs = append(errs, fmt.Errorf("near_duplicate_rate = %g, want in [0, 0.5]", c.NearDuplicateRate))
	}
	if c.MarriedFraction < 0 || c.MarriedFraction > 1 {
		errs = append(errs, fmt.Errorf("married_fraction = %g, want in [0, 1]", c.MarriedFraction))
	}
	total := 0
	for s, n := range c.SplitSizes() {
		if n < 0 {
			errs = append(errs, fmt.Errorf("%s = %d: question counts must be >= 0", Split(s), n))
		}
		total += max(n, 0)
	}
	if total == 0 {
		errs = append(errs, errors.New("all question counts are 0"))
	}
	if c.TwoHopFraction < 0 || c.TwoHopFraction > 1 {
		errs = append(errs, fmt.Errorf("two_hop_fraction = %g, want in [0, 1]", c.TwoHopFraction))
	}
	if added := len(AddedTokens()); c.VocabSize < 256+added+1 || c.VocabSize > 65536 {
		errs = append(errs, fmt.Errorf("vocab_size = %d, want in [%d, 65536] (256 bytes + %d added tokens + merges)", c.VocabSize, 256+added+1, added))
	}
	if c.MinMergeFrequency < 1 {
		errs = append(errs, fmt.Errorf("min_merge_frequency = %d, want >= 1", c.MinMergeFrequency))
	}
	return errors.Join(errs...)
}
