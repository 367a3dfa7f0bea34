// Package world builds the embedded default dataset of the demo: a
// deterministic synthetic encyclopedia, its questions and splits, and a small
// byte-level BPE tokenizer trained on its text.
//
// The world holds countries, cities, people, films, companies, bands and
// books. Names are generated from syllables, so no fact can be known without
// searching. Every entity is rendered as one to three wiki-18 style passages
// (`"Title"\ntext`) from varied sentence templates; every fact it holds is
// stated in exactly one of its own passages, and sometimes again in another
// entity's passage (a director's passage lists the films they directed).
// Confusable distractors are built in: near-identical names (one vowel
// apart), shared surnames, shared attributes (two people born in the same
// city and year, cities on the same river), and filler sentences that mention
// other cities, people and years.
//
// Questions are single-hop ("Where was Dalmor Keswin born?") or two-hop
// bridge questions ("Where was the director of The Silent Harbor born?"),
// each with its gold answer(s) and the gold passage ids of every hop. Each
// draw picks a relation chain ("directed_by+born_in") with probability
// proportional to the square root of its candidates, evening out the
// patterns. The splits (train, aps_calib, aci_calib, test) are built over
// disjoint sets of entities: entities are grouped into units (a person with
// their spouse and works; a country with its capital; any other city
// alone), units are assigned to splits, and a question belongs to a split
// only when every entity it is about (the subject and, for two-hop
// questions, the bridge) lies in that split.
//
// Script turns a question into the ideal response text (one search per hop)
// for the supervised warm start; TrainTokenizer learns the byte-level BPE
// and WriteDir writes everything as `cas world` does.
//
// Everything is deterministic from Config.Seed: math/rand/v2 PCG streams with
// fixed second words, no dependence on map iteration order. The world's text
// does not depend on the question counts or the vocabulary size, so changing
// the splits never changes the corpus.
//
// Data flow: world → corpus → index → retriever → APS → rollout. This package
// imports nothing else of the project but its bpe subpackage; the demo
// adapts its Passage and Question types to the search and agent packages.
package world
