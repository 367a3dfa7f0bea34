package world

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// factRef names fact f of entity e.
type factRef struct{ e, f int }

// sentence is one rendered sentence and the facts it states.
type sentence struct {
	text     string
	supports []factRef
}

// renderer writes the articles of a world.
type renderer struct {
	w *World
	r *rand.Rand
	// byKind lists entity indices per kind.
	byKind [numKinds][]int
	// works[p] lists the works (films, companies, bands, books) person p
	// created, and actedIn[p] the films p played the lead in.
	works, actedIn map[int][]int
}

// fact returns the index of entity e's fact of relation rel, or -1.
func (w *World) fact(e int, rel Rel) int {
	for i, f := range w.Entities[e].Facts {
		if f.Rel == rel {
			return i
		}
	}
	return -1
}

// render writes every entity's article as one to three passages and records
// which passages state which facts.
func (w *World) render(r *rand.Rand) error {
	rd := &renderer{w: w, r: r, works: map[int][]int{}, actedIn: map[int][]int{}}
	for i, e := range w.Entities {
		rd.byKind[e.Kind] = append(rd.byKind[e.Kind], i)
		for _, f := range e.Facts {
			switch f.Rel {
			case DirectedBy, FoundedBy, LeadSinger, WrittenBy:
				rd.works[f.Object] = append(rd.works[f.Object], i)
			case Starring:
				rd.actedIn[f.Object] = append(rd.actedIn[f.Object], i)
			}
		}
	}
	for e := range w.Entities {
		var intro sentence
		var rest []sentence
		switch w.Entities[e].Kind {
		case Country:
			intro, rest = rd.country(e)
		case City:
			intro, rest = rd.city(e)
		case Person:
			intro, rest = rd.person(e)
		case Film, Company, Band:
			intro, rest = rd.kindArticle(e, articleKinds[w.Entities[e].Kind])
		case Book:
			intro, rest = rd.book(e)
		}
		r.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
		rd.layout(e, append([]sentence{intro}, rest...))
	}
	// Own passages first, then other articles restating the fact.
	for e := range w.Entities {
		own := w.Entities[e].Passages
		for fi := range w.Entities[e].Facts {
			f := &w.Entities[e].Facts[fi]
			slices.SortFunc(f.Passages, func(a, b int) int {
				ao, bo := slices.Contains(own, a), slices.Contains(own, b)
				switch {
				case ao && !bo:
					return -1
				case bo && !ao:
					return 1
				}
				return a - b
			})
			f.Passages = slices.Compact(f.Passages)
			if len(f.Passages) == 0 || !slices.Contains(own, f.Passages[0]) {
				return fmt.Errorf("world: internal error: fact %s %s %q is stated in none of its own passages", w.Entities[e].ID, f.Rel, f.Value)
			}
		}
	}
	return nil
}

// layout cuts an article's sentences into one to three passages, of two or
// more sentences where the article is long enough.
func (rd *renderer) layout(e int, ss []sentence) {
	w := rd.w
	k := min(1+rd.r.IntN(3), max(1, (len(ss)+1)/2))
	ent := &w.Entities[e]
	for p := range k {
		lo, hi := p*len(ss)/k, (p+1)*len(ss)/k
		texts := make([]string, 0, hi-lo)
		idx := len(w.Passages)
		for _, s := range ss[lo:hi] {
			texts = append(texts, s.text)
			for _, ref := range s.supports {
				f := &w.Entities[ref.e].Facts[ref.f]
				f.Passages = append(f.Passages, idx)
			}
		}
		w.Passages = append(w.Passages, Passage{ID: strconv.Itoa(idx), Title: ent.Name, Text: strings.Join(texts, " "), Entity: e})
		ent.Passages = append(ent.Passages, idx)
	}
}

// say builds a sentence from a template whose {S} is the entity's name,
// {Sh} its short name, and further {X} placeholders given as pairs.
func (rd *renderer) say(e int, tmpl string, supports []factRef, kv ...string) sentence {
	ent := rd.w.Entities[e]
	pairs := append([]string{"{S}", ent.Name, "{Sh}", ent.Short}, kv...)
	return sentence{text: strings.NewReplacer(pairs...).Replace(tmpl), supports: supports}
}

// ref returns the reference to e's fact of relation rel (which must exist).
func (rd *renderer) ref(e int, rel Rel) factRef { return factRef{e, rd.w.fact(e, rel)} }

// value returns the object (name or literal) of e's fact rel, or "".
func (rd *renderer) value(e int, rel Rel) string {
	if i := rd.w.fact(e, rel); i >= 0 {
		return rd.w.Entities[e].Facts[i].Value
	}
	return ""
}

func (rd *renderer) object(e int, rel Rel) int {
	if i := rd.w.fact(e, rel); i >= 0 {
		return rd.w.Entities[e].Facts[i].Object
	}
	return -1
}

// other picks an entity of kind k other than not (a distractor mention).
func (rd *renderer) other(k Kind, not int) string {
	list := rd.byKind[k]
	for {
		if c := pick(rd.r, list); c != not || len(list) == 1 {
			return rd.w.Entities[c].Name
		}
	}
}

func (rd *renderer) yearPlus(e int, rel Rel, lo, hi int) string {
	y, _ := strconv.Atoi(rd.value(e, rel))
	return strconv.Itoa(min(lastYear, y+lo+rd.r.IntN(hi-lo+1)))
}

// choose picks one template of a list.
func (rd *renderer) choose(ts ...string) string { return pick(rd.r, ts) }

// fillers draws up to n filler sentences (no asked-about facts) from the
// candidates.
func (rd *renderer) fillers(n int, cands []sentence) []sentence {
	rd.r.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	return cands[:min(n, len(cands))]
}

func refs(rs ...factRef) []factRef { return rs }

// opening is one way to open an entity's passage: an intro sentence, and a
// follow-up (one template drawn from follow; none when follow is empty)
// stating the facts the intro leaves out.
type opening struct {
	intro      string
	introRefs  []factRef
	follow     []string
	followRefs []factRef
}

// open draws one of the openings and renders it.
func (rd *renderer) open(e int, kv []string, os ...opening) (sentence, []sentence) {
	o := os[rd.r.IntN(len(os))]
	intro := rd.say(e, o.intro, o.introRefs, kv...)
	switch len(o.follow) {
	case 0:
		return intro, nil
	case 1:
		return intro, []sentence{rd.say(e, o.follow[0], o.followRefs, kv...)}
	}
	return intro, []sentence{rd.say(e, rd.choose(o.follow...), o.followRefs, kv...)}
}

// article renders the articles of films, companies and bands: an opening
// drawn from os, the sentence stating fact ref (one of the templates in
// states), then none or one of the filler candidates, which are built only
// after that draw (their random mentions come after it in the stream).
func (rd *renderer) article(e int, kv []string, os []opening, ref factRef, states []string, fillers func() []sentence) (sentence, []sentence) {
	intro, rest := rd.open(e, kv, os...)
	rest = append(rest, rd.say(e, rd.choose(states...), refs(ref), kv...))
	n := rd.r.IntN(2)
	return intro, append(rest, rd.fillers(n, fillers())...)
}

func (rd *renderer) person(e int) (sentence, []sentence) {
	w, r := rd.w, rd.r
	city, year := rd.value(e, BornIn), rd.value(e, BirthYear)
	cityRef, yearRef := rd.ref(e, BornIn), rd.ref(e, BirthYear)
	ent := w.Entities[e]
	country := rd.object(rd.object(e, BornIn), InCountry)
	dem := w.Entities[country].Demonym
	kv := []string{"{C}", city, "{Y}", year, "{D}", dem, "{J}", ent.Occupation, "{C2}", rd.other(City, rd.object(e, BornIn))}
	intro, rest := rd.open(e, kv,
		opening{"{S} (born {Y}) is a {D} {J}.", refs(yearRef),
			[]string{"{Sh} was born in {C}.", "Born in {C}, {Sh} grew up in {C2}.", "{S} was born in the city of {C}."}, refs(cityRef)},
		opening{"{S} is a {D} {J}.", nil, []string{"{Sh} was born in {C} in {Y}.", "{S} was born in {Y} in the city of {C}."}, refs(cityRef, yearRef)},
		opening{"{S} was born in {C} in {Y} and is a {D} {J}.", refs(cityRef, yearRef), nil, nil})
	if si := w.fact(e, Spouse); si >= 0 {
		sp := w.Entities[e].Facts[si].Object
		both := refs(factRef{e, si}, rd.ref(sp, Spouse))
		kv := append(kv, "{P}", w.Entities[sp].Name, "{M}", strconv.Itoa(min(lastYear, max(rd.birthYear(e), rd.birthYear(sp))+20+r.IntN(15))))
		rest = append(rest, rd.say(e, rd.choose("{S} is married to {P}.", "{S} married {P} in {M}.", "{S} and {P} were married in {M}."), both, kv...))
	}
	// Restated facts of the person's works (not every article has them).
	if ws := rd.works[e]; len(ws) > 0 && r.Float64() < 0.6 {
		rest = append(rest, rd.worksSentence(e, ws))
	}
	if fs := rd.actedIn[e]; len(fs) > 0 && r.Float64() < 0.5 {
		f := pick(r, fs)
		rest = append(rest, rd.say(e, "{S} played the lead role in {F}.", refs(rd.ref(f, Starring)), "{F}", w.Entities[f].Name))
	}
	rest = append(rest, rd.fillers(r.IntN(2), []sentence{
		rd.say(e, "{Sh} later moved to {C2}.", nil, kv...),
		rd.say(e, "{Sh} studied in {C3}.", nil, "{C3}", rd.other(City, rd.object(e, BornIn))),
		rd.say(e, "In {Y2}, {Sh} received the {W} Prize.", nil, "{Y2}", rd.yearPlus(e, BirthYear, 30, 60), "{W}", word(r, 2)),
		rd.say(e, "{Sh} spent several years in {K}.", nil, "{K}", rd.other(Country, country)),
	})...)
	return intro, rest
}

func (rd *renderer) birthYear(p int) int {
	y, _ := strconv.Atoi(rd.value(p, BirthYear))
	return y
}

// worksSentence restates the creator relation of up to three works. Like
// every sentence that states another entity's fact whose answer is this
// person, it names the person in full.
func (rd *renderer) worksSentence(p int, ws []int) sentence {
	w := rd.w
	if len(ws) > 3 {
		ws = ws[:3]
	}
	var names []string
	var sup []factRef
	rel := DirectedBy
	switch w.Entities[ws[0]].Kind {
	case Company:
		rel = FoundedBy
	case Band:
		rel = LeadSinger
	case Book:
		rel = WrittenBy
	}
	for _, x := range ws {
		names = append(names, w.Entities[x].Name)
		sup = append(sup, rd.ref(x, rel))
	}
	list := names[0]
	if len(names) > 1 {
		list = strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
	var tmpl string
	switch rel {
	case DirectedBy:
		tmpl = rd.choose("{S} directed {L}.", "Films directed by {S} include {L}.")
	case FoundedBy:
		tmpl = rd.choose("{S} founded {L}.", "{S} is best known as the founder of {L}.")
	case LeadSinger:
		tmpl = rd.choose("{S} is the lead singer of {L}.", "{S} sings lead in {L}.")
	default:
		tmpl = rd.choose("{S} wrote {L}.", "Novels by {S} include {L}.")
	}
	return rd.say(p, tmpl, sup, "{L}", list)
}

// articleKind is what differs between the articles of films, companies
// and bands: the relations of the three facts they state (two to other
// entities, then a year) with their placeholders, the placeholder and value
// of the kind's attribute (genre, industry), the openings (their facts given
// as indices into rels), the fact stated after the opening with its
// templates, and the filler candidates (objs are the two entities).
type articleKind struct {
	rels     [3]Rel
	keys     [3]string
	attrKey  string
	attr     func(Entity) string
	openings []articleOpening
	stated   int
	states   []string
	fillers  func(rd *renderer, e int, objs [2]int) []sentence
}

// articleOpening is an opening whose facts are indices into rels.
type articleOpening struct {
	intro       string
	introFacts  []int
	follow      []string
	followFacts []int
}

var articleKinds = map[Kind]articleKind{
	Film: {
		rels: [3]Rel{DirectedBy, Starring, ReleaseYear}, keys: [3]string{"{D}", "{A}", "{Y}"},
		attrKey: "{G}", attr: func(en Entity) string { return en.Genre },
		openings: []articleOpening{
			{"{S} is a {Y} {G} film directed by {D}.", []int{2, 0}, nil, nil},
			{"{S} is a {G} film released in {Y}.", []int{2}, []string{"{S} was directed by {D}.", "{D} directed {S}."}, []int{0}},
			{"{S} is a {G} film directed by {D}.", []int{0}, []string{"{S} was released in {Y}.", "The film was released in {Y}."}, []int{2}},
		},
		stated: 1, states: []string{"{S} stars {A} in the lead role.", "{A} played the lead role in {S}.", "The lead role in {S} was played by {A}."},
		fillers: func(rd *renderer, e int, objs [2]int) []sentence {
			return []sentence{
				rd.say(e, "The film was shot in {C}.", nil, "{C}", rd.other(City, -1)),
				rd.say(e, "The music for {S} was written by {P}.", nil, "{P}", rd.other(Person, objs[0])),
				rd.say(e, "{S} received {R} reviews.", nil, "{R}", pick(rd.r, reviewWords)),
				rd.say(e, "It was filmed in {Y2}.", nil, "{Y2}", rd.yearPlus(e, ReleaseYear, -2, -1)),
				rd.say(e, "A sequel was announced in {Y2}.", nil, "{Y2}", rd.yearPlus(e, ReleaseYear, 2, 9)),
			}
		},
	},
	Company: {
		rels: [3]Rel{FoundedBy, Headquarters, FoundingYear}, keys: [3]string{"{F}", "{C}", "{Y}"},
		attrKey: "{I}", attr: func(en Entity) string { return en.Industry },
		openings: []articleOpening{
			{"{S} is a {I} company founded by {F} in {Y}.", []int{0, 2}, nil, nil},
			{"{S} is a {I} company.", nil, []string{"{F} founded {S} in {Y}."}, []int{0, 2}},
			{"{S} is a {I} company founded by {F}.", []int{0}, []string{"{S} was founded in {Y}.", "The company was founded in {Y}."}, []int{2}},
		},
		stated: 1, states: []string{"{S} has its headquarters in {C}.", "The headquarters of {S} are in {C}.", "{S} is headquartered in {C}."},
		fillers: func(rd *renderer, e int, objs [2]int) []sentence {
			f, hq := objs[0], objs[1]
			return []sentence{
				rd.say(e, "{S} also has offices in {C2}.", nil, "{C2}", rd.other(City, hq)),
				rd.say(e, "{S} was sold to {P} in {Y2}.", nil, "{P}", rd.other(Person, f), "{Y2}", rd.yearPlus(e, FoundingYear, 10, 40)),
				rd.say(e, "In {Y2}, {S} opened a factory in {C2}.", nil, "{Y2}", rd.yearPlus(e, FoundingYear, 3, 30), "{C2}", rd.other(City, hq)),
			}
		},
	},
	Band: {
		rels: [3]Rel{LeadSinger, FormedIn, FormedYear}, keys: [3]string{"{P}", "{C}", "{Y}"},
		attrKey: "{G}", attr: func(en Entity) string { return en.Genre },
		openings: []articleOpening{
			{"{S} is a {G} band formed in {C} in {Y}.", []int{1, 2}, nil, nil},
			{"{S} is a {G} band.", nil, []string{"{S} was formed in {C} in {Y}."}, []int{1, 2}},
			{"{S} is a {G} band formed in {Y}.", []int{2}, []string{"{S} was formed in {C}.", "The band was formed in {C}."}, []int{1}},
		},
		stated: 0, states: []string{"{S} is fronted by lead singer {P}.", "The lead singer of {S} is {P}.", "{P} is the lead singer of {S}."},
		fillers: func(rd *renderer, e int, objs [2]int) []sentence {
			return []sentence{
				rd.say(e, "Their first album appeared in {Y2}.", nil, "{Y2}", rd.yearPlus(e, FormedYear, 1, 3)),
				rd.say(e, "{S} toured {K} in {Y2}.", nil, "{K}", rd.other(Country, -1), "{Y2}", rd.yearPlus(e, FormedYear, 2, 12)),
				rd.say(e, "The drummer of {S} is {P2}.", nil, "{P2}", rd.other(Person, objs[0])),
			}
		},
	},
}

// kindArticle renders the article of a film, company or band from its
// articleKind: an opening, the sentence stating the remaining fact, then
// none or one filler (article).
func (rd *renderer) kindArticle(e int, k articleKind) (sentence, []sentence) {
	w := rd.w
	objs := [2]int{rd.object(e, k.rels[0]), rd.object(e, k.rels[1])}
	kv := []string{k.keys[0], w.Entities[objs[0]].Name, k.keys[1], w.Entities[objs[1]].Name,
		k.keys[2], rd.value(e, k.rels[2]), k.attrKey, k.attr(w.Entities[e])}
	factRefs := func(is []int) []factRef {
		var rs []factRef
		for _, i := range is {
			rs = append(rs, rd.ref(e, k.rels[i]))
		}
		return rs
	}
	ops := make([]opening, len(k.openings))
	for i, o := range k.openings {
		ops[i] = opening{o.intro, factRefs(o.introFacts), o.follow, factRefs(o.followFacts)}
	}
	return rd.article(e, kv, ops, rd.ref(e, k.rels[k.stated]), k.states, func() []sentence { return k.fillers(rd, e, objs) })
}

func (rd *renderer) book(e int) (sentence, []sentence) {
	w, r := rd.w, rd.r
	a := rd.object(e, WrittenBy)
	kv := []string{"{A}", w.Entities[a].Name, "{Y}", rd.value(e, PublishedYear)}
	aRef, yRef := rd.ref(e, WrittenBy), rd.ref(e, PublishedYear)
	intro, rest := rd.open(e, kv,
		opening{"{S} is a novel by {A}, published in {Y}.", refs(aRef, yRef), nil, nil},
		opening{"{S} is a novel by {A}.", refs(aRef), []string{"{S} was first published in {Y}.", "The novel was published in {Y}."}, refs(yRef)},
		opening{"{S} is a novel published in {Y}.", refs(yRef), []string{"{S} was written by {A}.", "{A} wrote the novel {S}."}, refs(aRef)})
	rest = append(rest, rd.fillers(r.IntN(2), []sentence{
		rd.say(e, "It was translated into {L}.", nil, "{L}", rd.value(pick(r, rd.byKind[Country]), Language)),
		rd.say(e, "The novel is set in {C}.", nil, "{C}", rd.other(City, -1)),
		rd.say(e, "{S} won the {W} Prize in {Y2}.", nil, "{W}", word(r, 2), "{Y2}", rd.yearPlus(e, PublishedYear, 1, 4)),
		rd.say(e, "The cover was painted by {P}.", nil, "{P}", rd.other(Person, a)),
	})...)
	return intro, rest
}

func (rd *renderer) city(e int) (sentence, []sentence) {
	w, r := rd.w, rd.r
	k := rd.object(e, InCountry)
	kv := []string{"{K}", w.Entities[k].Name, "{Y}", rd.value(e, CityFounded), "{R}", rd.value(e, River)}
	kRef, yRef := rd.ref(e, InCountry), rd.ref(e, CityFounded)
	var intro sentence
	var rest []sentence
	if rd.object(k, Capital) == e {
		intro = rd.say(e, "{S} is the capital of {K}.", refs(kRef, rd.ref(k, Capital)), kv...)
	} else {
		intro = rd.say(e, rd.choose("{S} is a city in {K}.", "{S} is a small city in {K}.", "{S} is a city in the north of {K}.", "{S} is a city in the south of {K}."), refs(kRef), kv...)
	}
	if rd.value(e, River) != "" {
		rRef := rd.ref(e, River)
		if r.IntN(2) == 0 {
			rest = append(rest, rd.say(e, "{S} was founded in {Y} on the banks of the {R}.", refs(yRef, rRef), kv...))
		} else {
			rest = append(rest, rd.say(e, "{S} was founded in {Y}.", refs(yRef), kv...),
				rd.say(e, rd.choose("{S} lies on the {R}.", "The {R} flows through {S}."), refs(rRef), kv...))
		}
	} else {
		rest = append(rest, rd.say(e, rd.choose("{S} was founded in {Y}.", "The city was founded in {Y}."), refs(yRef), kv...))
	}
	rest = append(rest, rd.fillers(r.IntN(2), []sentence{
		rd.say(e, "{S} is a {T} town.", nil, "{T}", rd.choose("market", "harbor", "mining", "university")),
		rd.say(e, "The old bridge of {S} dates from {Y2}.", nil, "{Y2}", rd.yearPlus(e, CityFounded, 50, 400)),
		rd.say(e, "{S} is known for its {T}.", nil, "{T}", rd.choose("markets", "bridges", "gardens", "old walls")),
	})...)
	return intro, rest
}

func (rd *renderer) country(e int) (sentence, []sentence) {
	w, r := rd.w, rd.r
	capital := rd.object(e, Capital)
	kv := []string{"{C}", w.Entities[capital].Name, "{L}", rd.value(e, Language), "{Y}", rd.value(e, Independence)}
	cRef, lRef, yRef := rd.ref(e, Capital), rd.ref(e, Language), rd.ref(e, Independence)
	capBoth := refs(cRef, rd.ref(capital, InCountry))
	var intro sentence
	var rest []sentence
	if r.IntN(2) == 0 {
		intro = rd.say(e, "{S} is a country whose capital is {C}.", capBoth, kv...)
	} else {
		intro = rd.say(e, "{S} is a country in the {D}.", nil, append(kv, "{D}", rd.choose("north", "south", "east", "west"))...)
		rest = append(rest, rd.say(e, rd.choose("The capital of {S} is {C}.", "{C} is the capital of {S}."), capBoth, kv...))
	}
	rest = append(rest,
		rd.say(e, rd.choose("The official language of {S} is {L}.", "{L} is the language spoken in {S}.", "People in {S} speak the {L} language."), refs(lRef), kv...),
		rd.say(e, rd.choose("{S} became independent in {Y}.", "{S} gained independence in {Y}."), refs(yRef), kv...))
	var cities []int
	for _, c := range rd.byKind[City] {
		if rd.object(c, InCountry) == e {
			cities = append(cities, c)
		}
	}
	rest = append(rest, rd.fillers(r.IntN(2), []sentence{
		rd.say(e, "{S} borders {K2}.", nil, "{K2}", rd.other(Country, e)),
		rd.say(e, "The largest city of {S} is {C2}.", nil, "{C2}", w.Entities[pick(r, cities)].Name),
		rd.say(e, "The currency of {S} is the {M}.", nil, "{M}", strings.ToLower(word(r, 2))),
	})...)
	return intro, rest
}
