package world

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cas-engine/cas/world/bpe"
)

// smallWorld is generated once for the read-only tests, with a GRPO split
// so that every split is exercised.
var smallWorld = sync.OnceValues(func() (*World, error) {
	c := SmallConfig(11)
	c.GRPO = 60
	return Generate(c)
})

func mustSmall(t testing.TB) *World {
	t.Helper()
	w, err := smallWorld()
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func writeWorld(t *testing.T, cfg Config) (string, *World, *bpe.Model) {
	t.Helper()
	w, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := w.TrainTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := w.WriteDir(dir, tok); err != nil {
		t.Fatal(err)
	}
	return dir, w, tok
}

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func TestDeterministicFiles(t *testing.T) {
	cfg := SmallConfig(5)
	dirA, _, _ := writeWorld(t, cfg)
	dirB, _, _ := writeWorld(t, cfg)
	a, b := readAll(t, dirA), readAll(t, dirB)
	want := []string{"aci_calib.jsonl", "aps_calib.jsonl", CorpusFile, "test.jsonl", TokenizerFile, "train.jsonl", ManifestFile}
	var names []string
	for n := range a {
		names = append(names, n)
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("files = %v, want %v (no temporary files left)", names, want)
	}
	for _, n := range names {
		if !bytes.Equal(a[n], b[n]) {
			t.Errorf("%s differs between two runs with seed 5", n)
		}
		if len(a[n]) == 0 {
			t.Errorf("%s is empty", n)
		}
	}
	dirC, _, _ := writeWorld(t, SmallConfig(6))
	if c := readAll(t, dirC); bytes.Equal(c[CorpusFile], a[CorpusFile]) {
		t.Error("seeds 5 and 6 give the same corpus")
	}
}

func TestCorpusIndependentOfSplitsAndVocab(t *testing.T) {
	cfg := SmallConfig(5)
	w1, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Train, cfg.Test, cfg.TwoHopFraction, cfg.VocabSize = 300, 50, 0.3, 600
	w2, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b1, b2 bytes.Buffer
	if err := WriteCorpus(&b1, w1.Passages); err != nil {
		t.Fatal(err)
	}
	if err := WriteCorpus(&b2, w2.Passages); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Error("changing question counts changed the corpus")
	}
	if len(w2.Splits[Train]) != 300 || len(w2.Splits[Test]) != 50 {
		t.Errorf("split sizes %d/%d, want 300/50", len(w2.Splits[Train]), len(w2.Splits[Test]))
	}
}

func TestSplitSizesAndTypes(t *testing.T) {
	w := mustSmall(t)
	cfg := w.Config
	want := cfg.SplitSizes()
	ids := map[string]bool{}
	for s := range NumSplits {
		qs := w.Splits[s]
		if len(qs) != want[s] {
			t.Errorf("%s: %d questions, want %d", s, len(qs), want[s])
		}
		two := 0
		for _, q := range qs {
			if ids[q.ID] {
				t.Errorf("duplicate question id %s", q.ID)
			}
			ids[q.ID] = true
			if !strings.HasPrefix(q.ID, s.String()+"_") {
				t.Errorf("question %s in split %s", q.ID, s)
			}
			switch {
			case q.Hops == 1 && q.Type == "single", q.Hops == 2 && q.Type == "bridge":
			default:
				t.Errorf("%s: hops %d, type %q", q.ID, q.Hops, q.Type)
			}
			if q.Hops == 2 {
				two++
			}
		}
		// Train and test have enough bridge candidates for the exact share.
		if s == Train || s == Test {
			if frac := float64(two) / float64(len(qs)); frac < cfg.TwoHopFraction-0.02 || frac > cfg.TwoHopFraction+0.02 {
				t.Errorf("%s: two-hop share %.3f, want %.2f", s, frac, cfg.TwoHopFraction)
			}
		}
	}
}

func TestTestEntitiesNeverInTrain(t *testing.T) {
	w := mustSmall(t)
	entitySets := [NumSplits]map[string]bool{}
	for s := range NumSplits {
		entitySets[s] = map[string]bool{}
		for _, q := range w.Splits[s] {
			if len(q.Entities) != q.Hops {
				t.Errorf("%s: %d entities for %d hops", q.ID, len(q.Entities), q.Hops)
			}
			for _, e := range q.Entities {
				entitySets[s][e] = true
			}
		}
	}
	for a := range NumSplits {
		for b := a + 1; b < NumSplits; b++ {
			for e := range entitySets[a] {
				if entitySets[b][e] {
					t.Errorf("entity %s is asked about in both %s and %s", e, a, b)
				}
			}
		}
	}
	// Subjects of test and GRPO questions do not even appear in train
	// question texts.
	var trainText strings.Builder
	for _, q := range w.Splits[Train] {
		trainText.WriteString(q.Question + "\n")
	}
	if len(w.Splits[GRPO]) == 0 {
		t.Fatal("the test world has no GRPO questions")
	}
	leaks := 0
	for _, q := range slices.Concat(w.Splits[Test], w.Splits[GRPO]) {
		if strings.Contains(trainText.String(), " "+q.HopInfo[0].Subject+"?") {
			leaks++
		}
	}
	if leaks > 0 {
		t.Errorf("%d test subjects appear as train question subjects", leaks)
	}
}

func passageByID(w *World) map[string]Passage {
	m := make(map[string]Passage, len(w.Passages))
	for _, p := range w.Passages {
		m[p.ID] = p
	}
	return m
}

func TestAnswersInGoldPassages(t *testing.T) {
	w := mustSmall(t)
	byID := passageByID(w)
	for s := range NumSplits {
		for _, q := range w.Splits[s] {
			if len(q.GoldIDs) != q.Hops || len(q.HopInfo) != q.Hops {
				t.Fatalf("%s: %d gold id lists, %d hops info for %d hops", q.ID, len(q.GoldIDs), len(q.HopInfo), q.Hops)
			}
			if q.GoldenAnswers[0] != q.HopInfo[q.Hops-1].Answer {
				t.Errorf("%s: golden answer %q, last hop answers %q", q.ID, q.GoldenAnswers[0], q.HopInfo[q.Hops-1].Answer)
			}
			for h, hop := range q.HopInfo {
				if len(q.GoldIDs[h]) == 0 {
					t.Fatalf("%s hop %d: no gold passage", q.ID, h)
				}
				for k, id := range q.GoldIDs[h] {
					p, ok := byID[id]
					if !ok {
						t.Fatalf("%s hop %d: gold id %s not in corpus", q.ID, h, id)
					}
					if !strings.Contains(p.Text, hop.Answer) {
						t.Errorf("%s hop %d: answer %q not in gold passage %s: %q", q.ID, h, hop.Answer, id, p.Text)
					}
					// The first gold passage is the subject's own article.
					if k == 0 && p.Title != hop.Subject {
						t.Errorf("%s hop %d: first gold passage is %q's, want %q's", q.ID, h, p.Title, hop.Subject)
					}
				}
			}
			last := q.GoldIDs[q.Hops-1]
			for _, id := range last {
				if !containsAny(byID[id].Text, q.GoldenAnswers) {
					t.Errorf("%s: no golden answer in final gold passage %s", q.ID, id)
				}
			}
		}
	}
}

func containsAny(s string, subs []string) bool {
	return slices.ContainsFunc(subs, func(x string) bool { return strings.Contains(s, x) })
}

func TestTwoHopChainsResolve(t *testing.T) {
	w := mustSmall(t)
	byEntity := map[string]int{}
	for i, e := range w.Entities {
		byEntity[e.ID] = i
	}
	lookup := func(id, rel string) (string, bool) {
		e, ok := byEntity[id]
		if !ok {
			return "", false
		}
		r, ok := relByName(rel)
		if !ok {
			return "", false
		}
		if f := w.fact(e, r); f >= 0 {
			return w.Entities[e].Facts[f].Value, true
		}
		return "", false
	}
	n := 0
	for s := range NumSplits {
		for _, q := range w.Splits[s] {
			for h, hop := range q.HopInfo {
				got, ok := lookup(hop.SubjectID, hop.Relation)
				if !ok || got != hop.Answer {
					t.Errorf("%s hop %d: %s.%s = %q (%v), want %q", q.ID, h, hop.SubjectID, hop.Relation, got, ok, hop.Answer)
				}
			}
			if q.Hops != 2 {
				continue
			}
			n++
			h0, h1 := q.HopInfo[0], q.HopInfo[1]
			if h0.Answer != h1.Subject || q.Entities[1] != h1.SubjectID || q.Entities[0] != h0.SubjectID {
				t.Errorf("%s: hop 1 answers %q but hop 2 is about %q", q.ID, h0.Answer, h1.Subject)
			}
			if strings.Contains(q.Question, h1.Subject) {
				t.Errorf("%s: the bridge entity %q is named in the question %q", q.ID, h1.Subject, q.Question)
			}
			if !strings.Contains(q.Question, h0.Subject) {
				t.Errorf("%s: question %q does not name its subject %q", q.ID, q.Question, h0.Subject)
			}
			if h1.Answer == h0.Subject {
				t.Errorf("%s: chain leads back to its subject", q.ID)
			}
		}
	}
	if n == 0 {
		t.Fatal("no two-hop questions")
	}
}

// hamming1 reports whether a and b have equal length and differ in one byte.
func hamming1(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	d := 0
	for i := range len(a) {
		if a[i] != b[i] {
			d++
		}
	}
	return d == 1
}

func TestDistractorsExist(t *testing.T) {
	w := mustSmall(t)
	near := map[Kind]int{}
	for k := range numKinds {
		var names []string
		for _, e := range w.Entities {
			if e.Kind == k {
				names = append(names, e.Name)
			}
		}
		for i := range names {
			for j := i + 1; j < len(names); j++ {
				if hamming1(names[i], names[j]) {
					near[k]++
				}
			}
		}
	}
	surnames := map[string]int{}
	type born struct{ city, year string }
	births := map[born]int{}
	rivers := map[string]int{}
	for e, ent := range w.Entities {
		switch ent.Kind {
		case Person:
			surnames[ent.Short]++
			births[born{w.Entities[e].Facts[w.fact(e, BornIn)].Value, w.Entities[e].Facts[w.fact(e, BirthYear)].Value}]++
		case City:
			if f := w.fact(e, River); f >= 0 {
				rivers[ent.Facts[f].Value]++
			}
		}
	}
	count := func(m map[string]int) int {
		n := 0
		for _, c := range m {
			if c > 1 {
				n++
			}
		}
		return n
	}
	sameBirth := 0
	for _, c := range births {
		if c > 1 {
			sameBirth++
		}
	}
	// Passages that mention a city without it being one of their entity's facts.
	var cityNames []string
	for _, e := range w.Entities {
		if e.Kind == City {
			cityNames = append(cityNames, e.Name)
		}
	}
	foreign := 0
	for _, p := range w.Passages {
		ent := w.Entities[p.Entity]
		for _, c := range cityNames {
			if c != ent.Name && strings.Contains(p.Text, " "+c+".") && !slices.ContainsFunc(ent.Facts, func(f Fact) bool { return f.Value == c }) {
				foreign++
				break
			}
		}
	}
	checks := []struct {
		name     string
		got, min int
	}{
		{"near-identical person names", near[Person], 3},
		{"near-identical city names", near[City], 1},
		{"surnames shared by two or more people", count(surnames), 10},
		{"pairs of people with the same birth city and year", sameBirth, 1},
		{"rivers shared by two or more cities", count(rivers), 3},
		{"passages mentioning an unrelated city", foreign, 20},
	}
	for _, c := range checks {
		if c.got < c.min {
			t.Errorf("%s: %d, want >= %d", c.name, c.got, c.min)
		}
		t.Logf("%s: %d", c.name, c.got)
	}
}

func TestEveryFactInOwnPassage(t *testing.T) {
	w := mustSmall(t)
	perEntity := map[int]int{}
	for e, ent := range w.Entities {
		if n := len(ent.Passages); n < 1 || n > 3 {
			t.Errorf("%s has %d passages, want 1 to 3", ent.ID, n)
		}
		for _, f := range ent.Facts {
			p := w.Passages[f.Passages[0]]
			if p.Entity != e || !strings.Contains(p.Text, f.Value) {
				t.Errorf("%s %s %q: primary passage %s (%q) is not its own or lacks the value", ent.ID, f.Rel, f.Value, p.ID, p.Text)
			}
		}
		perEntity[len(ent.Passages)]++
	}
	for k := 1; k <= 3; k++ {
		if perEntity[k] == 0 {
			t.Errorf("no entity has %d passages", k)
		}
	}
	for i, p := range w.Passages {
		if p.ID != itoa(i) || !strings.HasPrefix(p.Contents(), "\""+p.Title+"\"\n") {
			t.Fatalf("passage %d: id %q, contents %.40q", i, p.ID, p.Contents())
		}
	}
}

func itoa(i int) string { return strings.TrimSpace(string(must(marshal(i)))) }

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestWriteReadRoundTrip(t *testing.T) {
	cfg := SmallConfig(8)
	cfg.GRPO = 40
	dir, w, _ := writeWorld(t, cfg)
	ps, err := ReadCorpusFile(filepath.Join(dir, CorpusFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != len(w.Passages) {
		t.Fatalf("read %d passages, wrote %d", len(ps), len(w.Passages))
	}
	for i := range ps {
		if ps[i].ID != w.Passages[i].ID || ps[i].Title != w.Passages[i].Title || ps[i].Text != w.Passages[i].Text {
			t.Fatalf("passage %d read back as %+v, wrote %+v", i, ps[i], w.Passages[i])
		}
	}
	line, _, _ := bytes.Cut(must(os.ReadFile(filepath.Join(dir, CorpusFile))), []byte("\n"))
	if !regexp.MustCompile(`^\{"id": "0", "contents": "\\".+\\"\\n.+"\}$`).Match(line) {
		t.Errorf("corpus line not in wiki-18 form: %s", line)
	}
	for s := range NumSplits {
		qs, err := ReadQuestionsFile(filepath.Join(dir, SplitFile(s)))
		if err != nil {
			t.Fatal(err)
		}
		if len(qs) != len(w.Splits[s]) {
			t.Fatalf("%s: read %d questions, wrote %d", s, len(qs), len(w.Splits[s]))
		}
		for i := range qs {
			a, b := must(marshal(qs[i])), must(marshal(w.Splits[s][i]))
			if !bytes.Equal(a, b) {
				t.Fatalf("%s[%d] read back differently:\n%s\n%s", s, i, a, b)
			}
		}
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"one country", func(c *Config) { c.Countries = 1 }, "countries"},
		{"fewer cities than countries", func(c *Config) { c.Cities = 3 }, "capital"},
		{"too few people", func(c *Config) { c.People = 20 }, "people"},
		{"no questions", func(c *Config) { c.Train, c.APSCalib, c.ACICalib, c.Test = 0, 0, 0, 0 }, "question counts are 0"},
		{"negative questions", func(c *Config) { c.Test = -1 }, ">= 0"},
		{"two-hop fraction", func(c *Config) { c.TwoHopFraction = 1.5 }, "two_hop_fraction"},
		{"vocab too small", func(c *Config) { c.VocabSize = 260 }, "vocab_size"},
		{"too many questions", func(c *Config) { c.Test = 100000 }, "candidate questions"},
		{"too many films", func(c *Config) { c.Films, c.People = 5000, 20000 }, "films"},
		{"too many bands", func(c *Config) { c.Bands, c.People = 5000, 20000 }, "bands"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := SmallConfig(1)
			tc.edit(&cfg)
			_, err := Generate(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if _, err := ConfigForSize("huge", 1); err == nil {
		t.Error("ConfigForSize(huge) succeeded")
	}
}

func TestDefaultWorldIsFast(t *testing.T) {
	start := time.Now()
	w, err := Generate(DefaultConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := w.TrainTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	if len(w.Passages) < 2000 || tok.VocabSize() != w.Config.VocabSize {
		t.Errorf("default world: %d passages, vocab %d", len(w.Passages), tok.VocabSize())
	}
	// A few seconds on an idle 2-core machine; generous for a loaded one.
	if el > 20*time.Second {
		t.Errorf("default world and tokenizer took %v", el)
	}
	t.Logf("default world: %d entities, %d passages, tokenizer %d; %v", len(w.Entities), len(w.Passages), tok.VocabSize(), el)
}

func FuzzReadQuestions(f *testing.F) {
	fuzzRoundTrip(f, "questions", ReadQuestions, WriteQuestions, mustSmall(f).Splits[Test][:3],
		`{"id":"q","question":"Who?","golden_answers":["x"]}`,
		`{"id":"q","question":"Who?","golden_answers":["x"],"hops":2,"hop_info":[{}]}`,
		"\n\n{}\n")
}

func FuzzReadCorpus(f *testing.F) {
	fuzzRoundTrip(f, "corpus", ReadCorpus, WriteCorpus, mustSmall(f).Passages[:3],
		`{"id": "1", "contents": "no title line"}`,
		`{"id": 1}`)
}

// fuzzRoundTrip fuzzes a JSONL reader: whatever read accepts, write writes
// and read reads back with as many records. The corpus is seed as written
// by write, then extra.
func fuzzRoundTrip[T any](f *testing.F, what string, read func(io.Reader) ([]T, error), write func(io.Writer, []T) error, seed []T, extra ...string) {
	var b bytes.Buffer
	if err := write(&b, seed); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	for _, e := range extra {
		f.Add([]byte(e))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := read(bytes.NewReader(data))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := write(&out, recs); err != nil {
			t.Fatal(err)
		}
		again, err := read(&out)
		if err != nil || len(again) != len(recs) {
			t.Fatalf("written %s does not read back: %v (%d vs %d)", what, err, len(again), len(recs))
		}
	})
}

func BenchmarkGenerateDefault(b *testing.B) {
	for b.Loop() {
		if _, err := Generate(DefaultConfig(1)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTrainTokenizerDefault(b *testing.B) {
	w, err := Generate(DefaultConfig(1))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := w.TrainTokenizer(); err != nil {
			b.Fatal(err)
		}
	}
}
