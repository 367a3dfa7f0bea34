package world

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Split names one of the question splits.
type Split int

// The splits, in file order.
const (
	Train Split = iota
	APSCalib
	ACICalib
	Test
	// GRPO holds the questions of the reinforcement-learning stage, about
	// entities that no train question mentions: a policy warm-started on
	// train cannot answer them from memory, as Search-R1's RL questions are
	// new to its base model. Empty unless Config.GRPO asks for some.
	GRPO
	NumSplits
)

var splitNames = [NumSplits]string{"train", "aps_calib", "aci_calib", "test", "grpo"}

// String returns the split's file stem ("aps_calib").
func (s Split) String() string {
	if s < 0 || s >= NumSplits {
		return "split?"
	}
	return splitNames[s]
}

// ParseSplit maps a file stem back to its split.
func ParseSplit(name string) (Split, error) {
	for s, n := range splitNames {
		if n == name {
			return Split(s), nil
		}
	}
	return 0, fmt.Errorf("unknown split %q (want train, aps_calib, aci_calib, test or grpo)", name)
}

// Question is one line of a split file: FlashRAG's fields (id, question,
// golden_answers) plus what the demo needs to calibrate APS with exact gold
// passages and to script ideal trajectories.
type Question struct {
	ID            string   `json:"id"`
	Question      string   `json:"question"`
	GoldenAnswers []string `json:"golden_answers"`
	// Hops is 1 for a single-hop question, 2 for a bridge question.
	Hops int `json:"hops"`
	// Type is "single" or "bridge".
	Type string `json:"type"`
	// GoldIDs[h] lists the passage ids that state hop h's fact, the subject's
	// own passage first.
	GoldIDs [][]string `json:"gold_ids"`
	// HopInfo[h] describes hop h: its sub-question as the agent should
	// search for it and restate it.
	HopInfo []Hop `json:"hop_info"`
	// Entities are the ids of the entities the question is about: the
	// subject and, for bridge questions, the bridge entity.
	Entities []string `json:"entities"`
}

// Hop is one retrieval step of a question.
type Hop struct {
	Subject   string `json:"subject"`    // name of the hop's subject entity
	SubjectID string `json:"subject_id"` // its entity id
	Relation  string `json:"relation"`   // relation name ("directed_by")
	Answer    string `json:"answer"`     // the hop's object (the bridge, or the final answer)
	Query     string `json:"query"`      // the scripted search query: subject + keyword
	Need      string `json:"need"`       // "the director of The Silent Harbor"
	Statement string `json:"statement"`  // "The Silent Harbor was directed by Dalmor Keswin."
}

// unionFind groups entities into split units.
type unionFind []int

func (u unionFind) find(x int) int {
	for u[x] != x {
		u[x] = u[u[x]]
		x = u[x]
	}
	return x
}

// union links the roots so that the smaller index is the root: the result is
// independent of call order.
func (u unionFind) union(a, b int) {
	ra, rb := u.find(a), u.find(b)
	if ra == rb {
		return
	}
	if ra > rb {
		ra, rb = rb, ra
	}
	u[rb] = ra
}

// assignSplits groups entities into units (a person with their spouse and the
// works they created; a country with its capital; any other city alone) and
// deals the units of each class (places, people) to the splits in proportion
// to the requested question counts.
func (w *World) assignSplits(r *rand.Rand) {
	n := len(w.Entities)
	u := make(unionFind, n)
	for i := range u {
		u[i] = i
	}
	for i, e := range w.Entities {
		for _, f := range e.Facts {
			switch f.Rel {
			case Capital, Spouse, DirectedBy, FoundedBy, LeadSinger, WrittenBy:
				u.union(i, f.Object)
			}
		}
	}
	var weights [NumSplits]float64
	total := 0.0
	for s, n := range w.Config.SplitSizes() {
		weights[s] = float64(n)
		total += weights[s]
	}
	var cum [NumSplits]float64
	acc := 0.0
	for s := range NumSplits {
		acc += weights[s] / total
		cum[s] = acc
	}
	cum[NumSplits-1] = 1

	var places, people []int // unit roots in index order
	for i, e := range w.Entities {
		if u.find(i) != i {
			continue
		}
		if e.Kind == Country || e.Kind == City {
			places = append(places, i)
		} else {
			people = append(people, i)
		}
	}
	rootSplit := make(map[int]Split, len(places)+len(people))
	for _, class := range [][]int{places, people} {
		r.Shuffle(len(class), func(i, j int) { class[i], class[j] = class[j], class[i] })
		for k, root := range class {
			x := (float64(k) + 0.5) / float64(len(class))
			s := Split(0)
			for s < NumSplits-1 && x >= cum[s] {
				s++
			}
			rootSplit[root] = s
		}
	}
	w.EntitySplit = make([]Split, n)
	for i := range w.Entities {
		w.EntitySplit[i] = rootSplit[u.find(i)]
	}
}

// passageIDs converts passage indices to ids.
func (w *World) passageIDs(idx []int) []string {
	out := make([]string, len(idx))
	for i, p := range idx {
		out[i] = w.Passages[p].ID
	}
	return out
}

// hop describes fact f of entity e as a retrieval step.
func (w *World) hop(e int, f Fact) Hop {
	ent := w.Entities[e]
	ri := rels[f.Rel]
	return Hop{
		Subject:   ent.Name,
		SubjectID: ent.ID,
		Relation:  ri.name,
		Answer:    f.Value,
		Query:     ent.Name + " " + ri.keyword,
		Need:      "the " + ri.noun + " of " + ent.Name,
		Statement: fill(ri.statement, ent.Name, f.Value),
	}
}

// candidates lists every question whose entities all lie in one split,
// single-hop and two-hop separately, in entity and fact order.
func (w *World) candidates() (single, bridge [NumSplits][]Question) {
	for e, ent := range w.Entities {
		s := w.EntitySplit[e]
		for _, f := range ent.Facts {
			ri := rels[f.Rel]
			single[s] = append(single[s], Question{
				Question:      fill(ri.question, ent.Name, ""),
				GoldenAnswers: append([]string{f.Value}, f.Aliases...),
				Hops:          1,
				Type:          "single",
				GoldIDs:       [][]string{w.passageIDs(f.Passages)},
				HopInfo:       []Hop{w.hop(e, f)},
				Entities:      []string{ent.ID},
			})
			if !ri.edge || w.EntitySplit[f.Object] != s {
				continue
			}
			b := f.Object
			for _, f2 := range w.Entities[b].Facts {
				if !bridgeAllowed(f.Rel, f2.Rel) || f2.Object == e {
					continue
				}
				phrase := fill(ri.phrase, ent.Name, "")
				bridge[s] = append(bridge[s], Question{
					Question:      capitalize(fill(rels[f2.Rel].question, phrase, "")),
					GoldenAnswers: append([]string{f2.Value}, f2.Aliases...),
					Hops:          2,
					Type:          "bridge",
					GoldIDs:       [][]string{w.passageIDs(f.Passages), w.passageIDs(f2.Passages)},
					HopInfo:       []Hop{w.hop(e, f), w.hop(b, f2)},
					Entities:      []string{ent.ID, w.Entities[b].ID},
				})
			}
		}
	}
	return single, bridge
}

// makeSplits assigns entities to splits and samples each split's questions:
// round(n·TwoHopFraction) bridge questions and the rest single-hop, topping
// up with the other type when one runs short.
func (w *World) makeSplits(r *rand.Rand) error {
	w.assignSplits(r)
	single, bridge := w.candidates()
	want := w.Config.SplitSizes()
	for s := range NumSplits {
		n := want[s]
		ss, bs := single[s], bridge[s]
		if len(ss)+len(bs) < n {
			return fmt.Errorf("world: split %s has %d candidate questions (%d single-hop, %d two-hop) for %d requested: use a larger world or fewer questions",
				Split(s), len(ss)+len(bs), len(ss), len(bs), n)
		}
		nb := int(math.Round(float64(n) * w.Config.TwoHopFraction))
		nb = min(nb, len(bs))
		ns := min(n-nb, len(ss))
		nb = n - ns
		qs := make([]Question, 0, n)
		qs = append(qs, balanced(r, ss, ns)...)
		qs = append(qs, balanced(r, bs, nb)...)
		r.Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })
		for i := range qs {
			qs[i].ID = Split(s).String() + "_" + strconv.Itoa(i)
		}
		w.Splits[s] = qs
	}
	return nil
}

// pattern is a question's relation chain ("directed_by+born_in").
func pattern(q Question) string {
	var b strings.Builder
	for i, h := range q.HopInfo {
		if i > 0 {
			b.WriteByte('+')
		}
		b.WriteString(h.Relation)
	}
	return b.String()
}

// balanced draws n of cands without replacement so that relation patterns
// are evened out: each draw picks a pattern with probability proportional
// to the square root of its remaining candidates (people, the most numerous
// entities, would otherwise make birth years a fifth of all questions), then
// a random candidate of it.
func balanced(r *rand.Rand, cands []Question, n int) []Question {
	var keys []string
	groups := map[string][]Question{}
	for _, q := range cands {
		k := pattern(q)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k) // first-seen order: deterministic
		}
		groups[k] = append(groups[k], q)
	}
	for _, k := range keys {
		g := groups[k]
		r.Shuffle(len(g), func(i, j int) { g[i], g[j] = g[j], g[i] })
	}
	out := make([]Question, 0, n)
	for len(out) < n {
		total := 0.0
		for _, k := range keys {
			total += math.Sqrt(float64(len(groups[k])))
		}
		if total == 0 {
			break
		}
		x := r.Float64() * total
		k := keys[len(keys)-1]
		for _, kk := range keys {
			if x -= math.Sqrt(float64(len(groups[kk]))); x < 0 {
				k = kk
				break
			}
		}
		if len(groups[k]) == 0 {
			continue
		}
		g := groups[k]
		out = append(out, g[len(g)-1])
		groups[k] = g[:len(g)-1]
	}
	return out
}
