package world

import "strings"

// Kind is an entity type of the world.
type Kind int

// The entity kinds, in generation order.
const (
	Country Kind = iota
	City
	Person
	Film
	Company
	Band
	Book
	numKinds
)

var kindNames = [numKinds]string{"country", "city", "person", "film", "company", "band", "book"}

// String returns the kind's lowercase name ("person").
func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return "kind?"
	}
	return kindNames[k]
}

// Rel is a relation (or attribute) of an entity: the predicate of a fact.
type Rel int

// The relations. The subject kind of each is fixed; the object is either
// another entity (an edge, usable as the first hop of a bridge question) or a
// literal (a year, a river, a language).
const (
	BornIn        Rel = iota // person → city
	BirthYear                // person → year
	Spouse                   // person → person
	DirectedBy               // film → person
	ReleaseYear              // film → year
	Starring                 // film → person (lead actor)
	FoundedBy                // company → person
	Headquarters             // company → city
	FoundingYear             // company → year
	LeadSinger               // band → person
	FormedIn                 // band → city
	FormedYear               // band → year
	WrittenBy                // book → person
	PublishedYear            // book → year
	InCountry                // city → country
	CityFounded              // city → year
	River                    // city → river name
	Capital                  // country → city
	Language                 // country → language
	Independence             // country → year
	numRels
)

// relInfo describes how a relation is asked about and reasoned over.
//
//   - question: the single-hop question; {S} is the subject. For a two-hop
//     question {S} is the first hop's noun phrase instead of a name.
//   - phrase: a noun phrase naming the object through the subject, used when
//     the relation is the first hop of a bridge ("the director of {S}").
//   - noun: what the agent needs ("birthplace"), in "I need to find the
//     {noun} of {S}".
//   - keyword: appended to the subject in the scripted search query.
//   - statement: the fact as the agent restates it after reading ("{S} was
//     born in {O}.").
type relInfo struct {
	name      string
	subject   Kind
	object    Kind // the object's kind when edge is true
	edge      bool
	question  string
	phrase    string
	noun      string
	keyword   string
	statement string
}

var rels = [numRels]relInfo{
	BornIn:        {"born_in", Person, City, true, "Where was {S} born?", "the city where {S} was born", "birthplace", "born", "{S} was born in {O}."},
	BirthYear:     {"birth_year", Person, 0, false, "In what year was {S} born?", "", "birth year", "born", "{S} was born in {O}."},
	Spouse:        {"spouse", Person, Person, true, "Who is the spouse of {S}?", "the spouse of {S}", "spouse", "married", "{S} is married to {O}."},
	DirectedBy:    {"directed_by", Film, Person, true, "Who directed {S}?", "the director of {S}", "director", "directed", "{S} was directed by {O}."},
	ReleaseYear:   {"release_year", Film, 0, false, "In what year was {S} released?", "", "release year", "released", "{S} was released in {O}."},
	Starring:      {"starring", Film, Person, true, "Who played the lead role in {S}?", "the lead actor of {S}", "lead actor", "lead", "The lead role in {S} was played by {O}."},
	FoundedBy:     {"founded_by", Company, Person, true, "Who founded {S}?", "the founder of {S}", "founder", "founded", "{S} was founded by {O}."},
	Headquarters:  {"headquarters", Company, City, true, "In which city is {S} headquartered?", "the city where {S} is headquartered", "headquarters", "headquarters", "{S} is headquartered in {O}."},
	FoundingYear:  {"founding_year", Company, 0, false, "In what year was {S} founded?", "", "founding year", "founded", "{S} was founded in {O}."},
	LeadSinger:    {"lead_singer", Band, Person, true, "Who is the lead singer of {S}?", "the lead singer of {S}", "lead singer", "singer", "The lead singer of {S} is {O}."},
	FormedIn:      {"formed_in", Band, City, true, "In which city was {S} formed?", "the city where {S} was formed", "home city", "formed", "{S} was formed in {O}."},
	FormedYear:    {"formed_year", Band, 0, false, "In what year was {S} formed?", "", "formation year", "formed", "{S} was formed in {O}."},
	WrittenBy:     {"written_by", Book, Person, true, "Who wrote {S}?", "the author of {S}", "author", "novel", "{S} was written by {O}."},
	PublishedYear: {"published_year", Book, 0, false, "In what year was {S} published?", "", "publication year", "published", "{S} was published in {O}."},
	InCountry:     {"in_country", City, Country, true, "In which country is {S}?", "the country where {S} is located", "country", "country", "{S} is in {O}."},
	CityFounded:   {"city_founded", City, 0, false, "In what year was {S} founded?", "", "founding year", "founded", "{S} was founded in {O}."},
	River:         {"river", City, 0, false, "On which river does {S} lie?", "", "river", "river", "{S} lies on the {O}."},
	Capital:       {"capital", Country, City, true, "What is the capital of {S}?", "the capital of {S}", "capital", "capital", "The capital of {S} is {O}."},
	Language:      {"language", Country, 0, false, "What language is spoken in {S}?", "", "language", "language", "The language of {S} is {O}."},
	Independence:  {"independence", Country, 0, false, "In what year did {S} become independent?", "", "independence year", "independent", "{S} became independent in {O}."},
}

// String returns the relation's snake_case name ("directed_by").
func (r Rel) String() string {
	if r < 0 || r >= numRels {
		return "rel?"
	}
	return rels[r].name
}

// relByName maps a relation's name back to it; ok is false for unknown names.
func relByName(name string) (Rel, bool) {
	for r := Rel(0); r < numRels; r++ {
		if rels[r].name == name {
			return r, true
		}
	}
	return 0, false
}

// fill substitutes {S} and {O} in a template.
func fill(tmpl, s, o string) string {
	return strings.NewReplacer("{S}", s, "{O}", o).Replace(tmpl)
}

// bridgeAllowed reports whether the two-hop chain r1 then r2 makes a sensible
// question: r2 must take r1's object as subject, and chains that always lead
// straight back (capital → in_country, spouse → spouse) are excluded. Chains
// that lead back only sometimes are filtered per question.
func bridgeAllowed(r1, r2 Rel) bool {
	a, b := rels[r1], rels[r2]
	if !a.edge || b.subject != a.object {
		return false
	}
	switch {
	case r1 == Capital && r2 == InCountry, r1 == Spouse && r2 == Spouse:
		return false
	}
	return true
}
