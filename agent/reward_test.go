package agent

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// Passages in wiki-18's "contents" layout: a quoted title line, then the text.
const (
	docCitibank  = "\"Citibank\"\nCitibank The City Bank of New York was founded on June 16, 1812. The first president of the City Bank was the statesman and retired Colonel, Samuel Osgood."
	docCiti2     = "\"Citigroup\"\nCitigroup Citigroup Inc. is an American multinational investment bank. Its history dates back to the founding of the City Bank of New York in 1812."
	docMadison   = "\"James Madison\"\nJames Madison James Madison Jr. (March 16, 1751 – June 28, 1836) was the fourth president of the United States from 1809 to 1817."
	docJefferson = "\"Thomas Jefferson\"\nThomas Jefferson Thomas Jefferson was the third president of the United States from 1801 to 1809."
	docRio       = "\"2016 Summer Olympics\"\n2016 Summer Olympics The 2016 Summer Olympics were held in Rio de Janeiro, Brazil, from 5 to 21 August 2016."
	docOldMan    = "\"The Old Man and the Sea\"\nThe Old Man and the Sea The Old Man and the Sea is a short novel written by the American author Ernest Hemingway in 1951."
)

// caseMultiSearch is a two-hop question answered correctly after two
// searches (Bamboogle test_0), the information blocks in the code's format.
func caseMultiSearch() string {
	return "<think>I need the year Citibank was founded, then who was the US president in that year.</think>\n" +
		"<search> Citibank founded year </search>" +
		FormatInformation([]string{docCitibank, docCiti2}, InfoCode) +
		"\n<think>Citibank was founded as the City Bank of New York in 1812. Now I need the US president in 1812.</think>\n" +
		"<search> president of the United States in 1812 </search>" +
		FormatInformation([]string{docMadison, docJefferson}, InfoCode) +
		"\n<think>James Madison was president from 1809 to 1817, which includes 1812.</think>\n" +
		"<answer> James Madison </answer>"
}

// caseWrongAnswer is well formed but answers the city instead of the capital.
func caseWrongAnswer() string {
	return "<think>The question asks for the capital of the country that hosted the 2016 Summer Olympics.</think>" +
		"<search>2016 Summer Olympics host</search>" +
		FormatInformation([]string{docRio}, InfoSearchR1) +
		"<think>The 2016 Olympics were held in Rio de Janeiro.</think>\n<answer>Rio de Janeiro</answer>"
}

// caseCorrectOneSearch answers a single-hop NQ question after one search.
func caseCorrectOneSearch() string {
	return "<think>I should look up the author of the novel.</think>\n<search>the old man and the sea author</search>" +
		FormatInformation([]string{docOldMan}, InfoCode) +
		"\n<think>The novel was written by Ernest Hemingway.</think>\n<answer>The Ernest Hemingway.</answer>\n"
}

func TestScoreTable(t *testing.T) {
	madison := []string{"james madison"}
	brasilia := []string{"Brasília", "Brasilia"}
	hemingway := []string{"Ernest Hemingway"}
	paris := []string{"Paris"}
	cases := []struct {
		name     string
		response string
		golds    []string
		reward   float64
		em       bool
		valid    bool
		answer   string
	}{
		{"case study: multi-search correct", caseMultiSearch(), madison, 1.0, true, true, "James Madison"},
		{"case study: wrong answer", caseWrongAnswer(), brasilia, 0.2, false, true, "Rio de Janeiro"},
		{"case study: one search correct", caseCorrectOneSearch(), hemingway, 1.0, true, true, "The Ernest Hemingway."},
		{"direct answer", "<think>I know this.</think><answer>Paris</answer>", paris, 1.0, true, true, "Paris"},
		{"whitespace everywhere", " \n<think> a </think>\n\n<answer> Paris </answer> \n", paris, 1.0, true, true, "Paris"},
		{"nested think", "<think> a <think> b </think> </think><answer>Paris</answer>", paris, 0.8, true, false, "Paris"},
		{"nested tag in answer", "<think>a</think><answer><think>Paris</think></answer>", paris, 0.1, false, false, "<think>Paris</think>"},
		{"missing </think>", "<think> the capital of France is Paris <answer>Paris</answer>", paris, 0.8, true, false, "Paris"},
		{"missing </think>, wrong", "<think> hmm <answer>Lyon</answer>", paris, 0.1, false, false, "Lyon"},
		{"text between tags", "<think>easy</think> So the answer is <answer>Paris</answer>", paris, 0.8, true, false, "Paris"},
		{"text before first tag", "Sure! <think>easy</think><answer>Paris</answer>", paris, 0.8, true, false, "Paris"},
		{"text after answer", "<think>easy</think><answer>Paris</answer> Hope this helps.", paris, 0.8, true, false, "Paris"},
		{"two answers, last right", "<think>x</think><answer>London</answer><answer>Paris</answer>", paris, 0.8, true, false, "Paris"},
		{"two answers, first right", "<think>x</think><answer>Paris</answer><answer>London</answer>", paris, 0.1, false, false, "London"},
		{"answer without think", "<answer>Paris</answer>", paris, 0.8, true, false, "Paris"},
		{"search without information", "<think>a</think><search>q</search><think>b</think><answer>Paris</answer>", paris, 0.8, true, false, "Paris"},
		{"answer right after information", "<think>a</think><search>q</search><information>Doc 1</information><answer>Paris</answer>", paris, 0.8, true, false, "Paris"},
		{"invalid-action message", "<think>a</think>I will answer now." + InvalidActionMessage + "<think>b</think><answer>Paris</answer>", paris, 0.8, true, false, "Paris"},
		{"capitalised tags are text", "<Think>a</Think><answer>Paris</answer>", paris, 0.8, true, false, "Paris"},
		{"non-tags inside think", "<think>3 < 4 and <b>bold</b> <answer</think><answer>Paris</answer>", paris, 1.0, true, true, "Paris"},
		{"unclosed answer", "<think>a</think><answer>Paris", paris, 0, false, false, ""},
		{"search only", "<think>a</think><search>capital of France</search>", paris, 0, false, false, ""},
		{"empty response", "", paris, 0, false, false, ""},
		{"empty answer", "<think>a</think><answer></answer>", paris, 0.2, false, true, ""},
		{"no golds", "<think>a</think><answer>Paris</answer>", nil, 0.2, false, true, "Paris"},
	}
	cfg := DefaultRewardConfig()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := cfg.Score(c.response, c.golds)
			if o.Reward != c.reward || o.EM != c.em || o.Valid != c.valid || o.Answer != c.answer {
				t.Errorf("Score = %+v, want reward %v em %v valid %v answer %q (format: %v)",
					o, c.reward, c.em, c.valid, c.answer, CheckFormat(c.response))
			}
			if o.HasAnswer != (c.reward > 0) {
				t.Errorf("HasAnswer = %v with reward %v", o.HasAnswer, c.reward)
			}
		})
	}
}

func TestCheckFormatReason(t *testing.T) {
	cases := []struct{ response, reason string }{
		{"<think>a</think> b <answer>c</answer>", `unexpected content "b" between tags (state: after_think)`},
		{"<think>a<think>", "unexpected tag <think> in state in_think"},
		{"<think>a</think><answer>c</answer>!", `unexpected content "!" after </answer>`},
		{"<think>a</think>", "incomplete sequence, ended in state after_think"},
	}
	for _, c := range cases {
		err := CheckFormat(c.response)
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Reason != c.reason {
			t.Errorf("CheckFormat(%q) = %v, want reason %q", c.response, err, c.reason)
		}
	}
}

func TestExtractAnswer(t *testing.T) {
	cases := []struct {
		in, want string
		ok       bool
	}{
		{"<answer> Paris </answer>", "Paris", true},
		{"<answer>a</answer> x <answer>\n b \n</answer>", "b", true},
		{"<answer>a<answer>b</answer>", "a<answer>b", true}, // lazy, from the first opening tag
		{"<answer>a</answer><answer>b", "a", true},
		{"<answer>multi\nline</answer>", "multi\nline", true},
		{"</answer><answer>x", "", false},
		{"no tags", "", false},
	}
	for _, c := range cases {
		got, ok := ExtractAnswer(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("ExtractAnswer(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestAnswerSpan(t *testing.T) {
	cases := []struct {
		in   string
		want string // the spanned content
		ok   bool
	}{
		{caseMultiSearch(), " James Madison ", true},
		{"<think>x</think><answer>Paris</answer><answer>Lyon</answer>", "Paris", true},
		{"<answer></answer>", "", true},
		{"<answer>Paris", "", false},
		{"<think>no answer</think>", "", false},
	}
	for _, c := range cases {
		s, e, ok := AnswerSpan(c.in)
		if ok != c.ok || (ok && c.in[s:e] != c.want) {
			t.Errorf("AnswerSpan(%q) = %d, %d, %v", c.in, s, e, ok)
		}
		if ok && (c.in[s-len(AnswerOpen):s] != AnswerOpen || c.in[e:e+len(AnswerClose)] != AnswerClose) {
			t.Errorf("AnswerSpan(%q) = [%d,%d) does not sit between the tags", c.in, s, e)
		}
	}
}

func TestParseActionAndSearchQuery(t *testing.T) {
	cases := []struct {
		turn    string
		action  Action
		content string
	}{
		{"<think>I need the year.</think>\n<search> Citibank founded year </search>", ActionSearch, "Citibank founded year"},
		{"<think>done</think><answer> James Madison </answer>", ActionAnswer, "James Madison"},
		{"<search>first</search><search>second</search>", ActionSearch, "first"},
		{"<answer>a</answer><search>q</search>", ActionAnswer, "a"},
		{"<search>unclosed <answer>x</answer>", ActionAnswer, "x"},
		{"<answer>unclosed <search>q</search>", ActionSearch, "q"},
		{"<search>a</answer>", ActionInvalid, ""},
		{"<think>I am not sure what to do.</think>", ActionInvalid, ""},
		{"", ActionInvalid, ""},
	}
	for _, c := range cases {
		a, content := ParseAction(c.turn)
		if a != c.action || content != c.content {
			t.Errorf("ParseAction(%q) = %v %q, want %v %q", c.turn, a, content, c.action, c.content)
		}
	}
	if q, ok := SearchQuery("<think>x</think><search>\n capital of France \n</search><search>b</search>"); !ok || q != "capital of France" {
		t.Errorf("SearchQuery = %q, %v", q, ok)
	}
	if _, ok := SearchQuery("<search>unclosed"); ok {
		t.Error("SearchQuery found a query in an unclosed tag")
	}
}

// refValid is Search-R1's is_valid_sequence transcribed literally (re.split
// on the tag pattern, then the state machine), an independent oracle for
// CheckFormat.
func refValid(content string) bool {
	tagRe := regexp.MustCompile(`</?(?:think|search|information|answer)>`)
	var parts []string
	last := 0
	for _, m := range tagRe.FindAllStringIndex(content, -1) {
		parts = append(parts, content[last:m[0]], content[m[0]:m[1]])
		last = m[1]
	}
	parts = append(parts, content[last:])
	state := "start"
	for _, part := range parts {
		if pyStrip(part) == "" {
			continue
		}
		if loc := tagRe.FindStringIndex(part); loc != nil && loc[0] == 0 { // re.match
			switch {
			case part == "<think>" && (state == "start" || state == "information"):
				state = "in_think"
			case part == "</think>" && state == "in_think":
				state = "after_think"
			case part == "<search>" && state == "after_think":
				state = "in_search"
			case part == "</search>" && state == "in_search":
				state = "after_search"
			case part == "<information>" && state == "after_search":
				state = "in_information"
			case part == "</information>" && state == "in_information":
				state = "information"
			case part == "<answer>" && state == "after_think":
				state = "in_answer"
			case part == "</answer>" && state == "in_answer":
				state = "end"
			default:
				return false
			}
			continue
		}
		switch state {
		case "in_think", "in_search", "in_information", "in_answer":
		default:
			return false
		}
	}
	return state == "end"
}

// refAction is Search-R1's postprocess_predictions with Go's RE2: the
// leftmost of the two tag patterns wins.
func refAction(s string) (Action, string) {
	sm := regexp.MustCompile(`(?s)<search>(.*?)</search>`).FindStringSubmatchIndex(s)
	am := regexp.MustCompile(`(?s)<answer>(.*?)</answer>`).FindStringSubmatchIndex(s)
	switch {
	case sm != nil && (am == nil || sm[0] < am[0]):
		return ActionSearch, pyStrip(s[sm[2]:sm[3]])
	case am != nil:
		return ActionAnswer, pyStrip(s[am[2]:am[3]])
	}
	return ActionInvalid, ""
}

func refExtract(s string) (string, bool) {
	ms := regexp.MustCompile(`(?s)<answer>(.*?)</answer>`).FindAllStringSubmatch(s, -1)
	if len(ms) == 0 {
		return "", false
	}
	return pyStrip(ms[len(ms)-1][1]), true
}

func fuzzSeeds(f *testing.F) {
	for _, s := range []string{
		caseMultiSearch(), caseWrongAnswer(), caseCorrectOneSearch(), "",
		"<think>a</think><answer>b</answer>", "<think><think></think>", "<answer>a<answer>b</answer>",
		"<search>a</search><answer>b</answer>", "<<search>>x</search>", "<think>a</think>\x1c<answer>b</answer>",
	} {
		f.Add(s)
	}
}

// FuzzCheckFormat compares the grammar check with the literal transcription
// of the reference and checks that a valid response always has an answer.
func FuzzCheckFormat(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		v := ValidFormat(s)
		if want := refValid(s); v != want {
			t.Fatalf("ValidFormat(%q) = %v, reference %v", s, v, want)
		}
		if v {
			if _, ok := ExtractAnswer(s); !ok {
				t.Fatalf("valid response %q without answer", s)
			}
		}
	})
}

// FuzzParseAction compares the tag extractors with regexp references.
func FuzzParseAction(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		a, c := ParseAction(s)
		if ra, rc := refAction(s); a != ra || c != rc {
			t.Fatalf("ParseAction(%q) = %v %q, reference %v %q", s, a, c, ra, rc)
		}
		ans, ok := ExtractAnswer(s)
		if rans, rok := refExtract(s); ans != rans || ok != rok {
			t.Fatalf("ExtractAnswer(%q) = %q %v, reference %q %v", s, ans, ok, rans, rok)
		}
		if st, e, ok := AnswerSpan(s); ok {
			if !strings.HasSuffix(s[:st], AnswerOpen) || !strings.HasPrefix(s[e:], AnswerClose) || strings.Contains(s[st:e], AnswerClose) {
				t.Fatalf("AnswerSpan(%q) = [%d,%d) not a first answer's content", s, st, e)
			}
		}
	})
}

func BenchmarkScore(b *testing.B) {
	r := caseMultiSearch()
	cfg := DefaultRewardConfig()
	golds := []string{"james madison"}
	b.SetBytes(int64(len(r)))
	for b.Loop() {
		cfg.Score(r, golds)
	}
}

func ExampleRewardConfig_Score() {
	cfg := DefaultRewardConfig()
	golds := []string{"Paris"}
	for _, r := range []string{
		"<think>easy</think><answer> paris </answer>",      // EM, valid
		"<think>easy</think> It is <answer>Paris</answer>", // EM, text between tags
		"<think>easy</think><answer>Lyon</answer>",         // wrong, valid
		"<think>easy <answer>Lyon</answer>",                // wrong, missing </think>
		"<think>easy</think>",                              // no answer
	} {
		fmt.Println(cfg.Score(r, golds).Reward)
	}
	// Output:
	// 1
	// 0.8
	// 0.2
	// 0.1
	// 0
}
