package world

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Fixed second words of the PCG streams, one per stage, so that each stage's
// randomness depends only on the seed (the corpus does not change when the
// question counts do).
const (
	streamEntities  = 0x5eed_0001_c0a5_0001
	streamPassages  = 0x5eed_0002_c0a5_0002
	streamQuestions = 0x5eed_0003_c0a5_0003
)

func newRand(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

// Entity is one thing the encyclopedia has an article about.
type Entity struct {
	ID    string // "person-17": kind and index within the kind
	Kind  Kind
	Name  string // the article title
	Short string // how sentences refer to it: the surname for people
	Facts []Fact
	// Passages are the indices into World.Passages of the entity's own
	// article (one to three passages).
	Passages []int

	Occupation string // person: "film director", "chemist", …
	Demonym    string // country: "Velmorian"
	Genre      string // film, band: "thriller", "folk"
	Industry   string // company: "shipping"
}

// Fact is one (subject, relation, object) triple, held by its subject.
type Fact struct {
	Rel Rel
	// Object is the object entity's index for edge relations, -1 for
	// literals.
	Object int
	// Value is the object's name or the literal ("1952", "Tesk River").
	Value string
	// Aliases are further accepted answers ("Tesk" for "Tesk River").
	Aliases []string
	// Passages are the indices of the passages that state the fact: the
	// subject's own passage first, then any other entity's passage that
	// restates it, in index order.
	Passages []int
}

// Passage is one retrievable unit of the corpus, in wiki-18 form: the
// stored contents are `"Title"` + "\n" + Text.
type Passage struct {
	ID     string // decimal index, as in wiki-18
	Title  string
	Text   string
	Entity int // index of the entity whose article it belongs to
}

// Contents returns the wiki-18 contents field: the quoted title, a newline,
// the text.
func (p Passage) Contents() string { return `"` + p.Title + "\"\n" + p.Text }

// World is a generated encyclopedia with its question splits.
type World struct {
	Config   Config
	Entities []Entity
	Passages []Passage
	// EntitySplit is the split each entity's unit was assigned to.
	EntitySplit []Split
	Splits      [NumSplits][]Question
}

// Generate builds the world for cfg: entities, passages and question splits
// (not the tokenizer; see TrainTokenizer).
func Generate(cfg Config) (*World, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("world config: %w", err)
	}
	g := &gen{cfg: cfg, r: newRand(cfg.Seed, streamEntities), used: map[string]bool{}}
	g.countriesAndCities()
	g.people()
	g.works()
	w := &World{Config: cfg, Entities: g.ents}
	if err := w.render(newRand(cfg.Seed, streamPassages)); err != nil {
		return nil, err
	}
	if err := w.makeSplits(newRand(cfg.Seed, streamQuestions)); err != nil {
		return nil, err
	}
	return w, nil
}

// gen carries the state of entity generation.
type gen struct {
	cfg    Config
	r      *rand.Rand
	used   map[string]bool // lowercased names already taken (lookups only)
	ents   []Entity
	byKind [numKinds][]int
	// per-kind extras
	countryBase []string // country name without its tail, for near duplicates
	rivers      [][]string
	givenPool   []string
	surnamePool []string
	roleOf      []int    // role of the i-th person
	spouses     [][2]int // married couples, as entity indices
}

// add appends an entity and returns its index.
func (g *gen) add(e Entity) int {
	e.ID = e.Kind.String() + "-" + strconv.Itoa(len(g.byKind[e.Kind]))
	if e.Short == "" {
		e.Short = e.Name
	}
	i := len(g.ents)
	g.ents = append(g.ents, e)
	g.byKind[e.Kind] = append(g.byKind[e.Kind], i)
	return i
}

// claim registers a name if it is free (case-insensitively) and long enough
// not to look like a common word.
func (g *gen) claim(name string) bool {
	k := strings.ToLower(name)
	if len(k) < 4 || g.used[k] {
		return false
	}
	g.used[k] = true
	return true
}

// fresh returns a new unique name: with probability NearDuplicateRate a
// one-vowel variant of one of prev, otherwise a draw of mk.
func (g *gen) fresh(prev []string, mk func() string) string {
	if len(prev) > 0 && g.r.Float64() < g.cfg.NearDuplicateRate {
		for range 8 {
			if m, ok := mutateVowel(g.r, pick(g.r, prev)); ok && g.claim(m) {
				return m
			}
		}
	}
	for {
		if n := mk(); g.claim(n) {
			return n
		}
	}
}

func (g *gen) names(kind Kind) []string {
	out := make([]string, len(g.byKind[kind]))
	for i, e := range g.byKind[kind] {
		out[i] = g.ents[e].Name
	}
	return out
}

func (g *gen) addFact(e int, rel Rel, obj int, value string, aliases ...string) {
	g.ents[e].Facts = append(g.ents[e].Facts, Fact{Rel: rel, Object: obj, Value: value, Aliases: aliases})
}

func (g *gen) addEdge(e int, rel Rel, obj int) { g.addFact(e, rel, obj, g.ents[obj].Name) }

func (g *gen) addYear(e int, rel Rel, y int) { g.addFact(e, rel, -1, strconv.Itoa(y)) }

// between draws an integer uniformly from [lo, hi].
func (g *gen) between(lo, hi int) int {
	if hi <= lo {
		return lo
	}
	return lo + g.r.IntN(hi-lo+1)
}

const lastYear = 2024

func (g *gen) countriesAndCities() {
	r := g.r
	capitals := make([]int, g.cfg.Countries)
	for range g.cfg.Countries {
		var base, name, demonym string
		for {
			if len(g.countryBase) > 0 && r.Float64() < g.cfg.NearDuplicateRate {
				if m, ok := mutateVowel(r, pick(r, g.countryBase)); ok {
					base = m
				} else {
					base = word(r, 2)
				}
			} else {
				base = word(r, 2)
			}
			tail := pick(r, countryTails)
			name, demonym = base+tail.name, base+tail.demonym
			if g.claim(name) {
				break
			}
		}
		g.countryBase = append(g.countryBase, base)
		g.add(Entity{Kind: Country, Name: name, Demonym: demonym})
		var rivers []string
		for range g.between(1, 3) {
			rivers = append(rivers, g.fresh(nil, func() string { return word(r, 1+r.IntN(2)) + " River" }))
		}
		g.rivers = append(g.rivers, rivers)
	}
	for i := range g.cfg.Cities {
		country := i
		if i >= g.cfg.Countries {
			country = r.IntN(g.cfg.Countries)
		}
		name := g.fresh(g.names(City), func() string { return word(r, 1+r.IntN(2)) + pick(r, citySuffixes) })
		c := g.add(Entity{Kind: City, Name: name})
		if i < g.cfg.Countries {
			capitals[i] = c
		}
		ci := g.byKind[Country][country]
		g.addEdge(c, InCountry, ci)
		g.addYear(c, CityFounded, g.between(800, 1900))
		if r.Float64() < 0.7 {
			river := pick(r, g.rivers[country])
			g.addFact(c, River, -1, river, strings.TrimSuffix(river, " River"))
		}
	}
	for i, ci := range g.byKind[Country] {
		g.addEdge(ci, Capital, capitals[i])
		lang := g.fresh(nil, func() string { return word(r, 1+r.IntN(2)) + pick(r, langTails) })
		g.addFact(ci, Language, -1, lang)
		g.addYear(ci, Independence, g.between(1600, 1990))
	}
}

// roles of people.
const (
	roleOther = iota
	roleDirector
	roleActor
	roleFounder
	roleSinger
	roleWriter
)

// roleJobs is the occupation of each role; people without one get a random
// occupation of otherJobs.
var roleJobs = [...]string{
	roleDirector: "film director", roleActor: "actor", roleFounder: "entrepreneur",
	roleSinger: "singer", roleWriter: "novelist",
}

func (g *gen) people() {
	r := g.r
	for len(g.givenPool) < max(20, g.cfg.People/3) {
		if n := word(r, 2); len(n) >= 4 {
			g.givenPool = append(g.givenPool, n)
		}
	}
	for len(g.surnamePool) < max(10, g.cfg.People/4) {
		if n := word(r, 2+r.IntN(4)/3); len(n) >= 4 {
			g.surnamePool = append(g.surnamePool, n)
		}
	}
	rc := g.cfg.roles()
	roles := make([]int, g.cfg.People)
	k := 0
	for _, rn := range []struct{ role, n int }{
		{roleDirector, rc.directors}, {roleActor, rc.actors}, {roleFounder, rc.founders},
		{roleSinger, rc.singers}, {roleWriter, rc.writers},
	} {
		for range rn.n {
			roles[k] = rn.role
			k++
		}
	}
	r.Shuffle(len(roles), func(i, j int) { roles[i], roles[j] = roles[j], roles[i] })

	cities := g.byKind[City]
	var full []string
	for i := range g.cfg.People {
		var given, surname string
		for {
			if len(full) > 0 && r.Float64() < g.cfg.NearDuplicateRate {
				// A near namesake of an earlier person: same given name with a
				// one-vowel surname variant, or the other way round.
				p := g.ents[g.byKind[Person][r.IntN(len(full))]]
				given, surname = strings.Fields(p.Name)[0], p.Short
				if r.IntN(2) == 0 {
					if m, ok := mutateVowel(r, surname); ok {
						surname = m
					}
				} else if m, ok := mutateVowel(r, given); ok {
					given = m
				}
			} else {
				given, surname = pick(r, g.givenPool), pick(r, g.surnamePool)
			}
			if g.claim(given + " " + surname) {
				break
			}
		}
		full = append(full, given+" "+surname)
		job := roleJobs[roles[i]]
		if job == "" {
			job = pick(r, otherJobs)
		}
		p := g.add(Entity{Kind: Person, Name: given + " " + surname, Short: surname, Occupation: job})
		g.addEdge(p, BornIn, pick(r, cities))
		g.addYear(p, BirthYear, g.between(1880, 1990))
		g.roleOf = append(g.roleOf, roles[i])
	}

	// Marriages: pairs of a shuffled list; sometimes the second spouse takes
	// the first's surname (one more shared surname).
	people := append([]int(nil), g.byKind[Person]...)
	r.Shuffle(len(people), func(i, j int) { people[i], people[j] = people[j], people[i] })
	pairs := int(float64(len(people))*g.cfg.MarriedFraction) / 2
	for i := range pairs {
		a, b := people[2*i], people[2*i+1]
		if r.Float64() < 0.3 {
			pb := &g.ents[b]
			given := strings.Fields(pb.Name)[0]
			if n := given + " " + g.ents[a].Short; g.claim(n) {
				delete(g.used, strings.ToLower(pb.Name))
				pb.Name, pb.Short = n, g.ents[a].Short
			}
		}
		g.spouses = append(g.spouses, [2]int{a, b})
	}
	for _, ab := range g.spouses {
		a, b := ab[0], ab[1]
		g.addEdge(a, Spouse, b)
		g.addEdge(b, Spouse, a)
	}
}

// personYear returns a person's birth year.
func (g *gen) birthYear(p int) int {
	for _, f := range g.ents[p].Facts {
		if f.Rel == BirthYear {
			y, _ := strconv.Atoi(f.Value)
			return y
		}
	}
	return 1900
}

func (g *gen) birthCity(p int) int {
	for _, f := range g.ents[p].Facts {
		if f.Rel == BornIn {
			return f.Object
		}
	}
	return g.byKind[City][0]
}

// withRole lists the people of a role in index order.
func (g *gen) withRole(role int) []int {
	var out []int
	for i, p := range g.byKind[Person] {
		if g.roleOf[i] == role {
			out = append(out, p)
		}
	}
	return out
}

// creator picks the creator of the j-th work: every person of the role gets
// at least one work, the rest are drawn at random.
func (g *gen) creator(list []int, j int) int {
	if j < len(list) {
		return list[j]
	}
	return pick(g.r, list)
}

// cityNear draws a city, which is p's birth city with probability prob.
func (g *gen) cityNear(cities []int, p int, prob float64) int {
	c := pick(g.r, cities)
	if g.r.Float64() < prob {
		c = g.birthCity(p)
	}
	return c
}

func (g *gen) year(p, lo, hi int) int { return min(lastYear, g.birthYear(p)+g.between(lo, hi)) }

func (g *gen) works() {
	r := g.r
	directors, actors := g.withRole(roleDirector), g.withRole(roleActor)
	founders, singers, writers := g.withRole(roleFounder), g.withRole(roleSinger), g.withRole(roleWriter)
	cities := g.byKind[City]

	for j := range g.cfg.Films {
		title := g.fresh(nil, func() string { return "The " + pick(r, titleAdjectives) + " " + pick(r, titleNouns) })
		d := g.creator(directors, j)
		f := g.add(Entity{Kind: Film, Name: title, Genre: pick(r, filmGenres)})
		g.addEdge(f, DirectedBy, d)
		g.addYear(f, ReleaseYear, g.year(d, 25, 60))
		g.addEdge(f, Starring, pick(r, actors))
	}
	for j := range g.cfg.Companies {
		ind := pick(r, industries)
		name := g.fresh(g.names(Company), func() string { return word(r, 2) + " " + ind.suffix })
		founder := g.creator(founders, j)
		c := g.add(Entity{Kind: Company, Name: name, Industry: ind.name})
		g.addEdge(c, FoundedBy, founder)
		g.addEdge(c, Headquarters, g.cityNear(cities, founder, 0.4))
		g.addYear(c, FoundingYear, g.year(founder, 20, 55))
	}
	for j := range g.cfg.Bands {
		name := g.fresh(nil, func() string { return "The " + pick(r, titleAdjectives) + " " + pick(r, bandNouns) })
		singer := g.creator(singers, j)
		b := g.add(Entity{Kind: Band, Name: name, Genre: pick(r, bandGenres)})
		g.addEdge(b, LeadSinger, singer)
		g.addEdge(b, FormedIn, g.cityNear(cities, singer, 0.5))
		g.addYear(b, FormedYear, g.year(singer, 16, 30))
	}
	for j := range g.cfg.Books {
		name := g.fresh(nil, func() string {
			if r.IntN(2) == 0 {
				return "The " + pick(r, titleNouns) + " of " + word(r, 2)
			}
			noun := pick(r, titleNouns)
			if strings.IndexByte("AEIOU", noun[0]) >= 0 {
				return "An " + noun + " for " + pick(r, g.givenPool)
			}
			return "A " + noun + " for " + pick(r, g.givenPool)
		})
		a := g.creator(writers, j)
		b := g.add(Entity{Kind: Book, Name: name})
		g.addEdge(b, WrittenBy, a)
		g.addYear(b, PublishedYear, g.year(a, 22, 65))
	}
}
