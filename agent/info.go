package agent

import (
	"strconv"
	"strings"

	"github.com/cas-engine/cas/internal/textenum"
	"github.com/cas-engine/cas/search"
)

// InvalidActionMessage is appended after a turn that has neither a
// <search> nor an <answer> (Search-R1's observation for an invalid action).
const InvalidActionMessage = "\nMy previous action is invalid. " +
	"If I want to search, I should put the query between <search> and </search>. " +
	"If I want to give the final answer, I should put the answer between <answer> and </answer>. " +
	"Let me try again.\n"

// InfoFormat selects how retrieved passages are written into the trajectory.
type InfoFormat int

const (
	// InfoCode is the official CAS code's format (the default), from verl's
	// search tool:
	//
	//	"<information>" + strip(Σ_i "Doc {i} (Title: {title})\n{text}\n\n") + "</information>"
	InfoCode InfoFormat = iota
	// InfoSearchR1 is Search-R1's format:
	//
	//	"\n\n<information>" + strip(Σ_i "Doc {i}(Title: {title}) {text}\n") + "</information>\n\n"
	InfoSearchR1
)

var infoFormatNames = textenum.Names[InfoFormat]{Type: "InfoFormat", Kind: "information format", Names: []string{"code", "search-r1"},
	Aliases: map[string]InfoFormat{"": InfoCode, "cas": InfoCode, "searchr1": InfoSearchR1}}

// String gives the flag spelling of the format.
func (f InfoFormat) String() string { return infoFormatNames.String(f) }

// MarshalText encodes the value by its flag spelling.
func (f InfoFormat) MarshalText() ([]byte, error) { return infoFormatNames.Marshal(f) }

// UnmarshalText decodes a flag spelling (ParseInfoFormat).
func (f *InfoFormat) UnmarshalText(b []byte) error { return infoFormatNames.Unmarshal(b, f) }

// ParseInfoFormat reads an information-format flag: "code" or "search-r1".
func ParseInfoFormat(s string) (InfoFormat, error) { return infoFormatNames.Parse(s) }

// FormatInformation renders the information block appended after a search
// turn, numbering the passages "Doc 1", "Doc 2", … in the order given (the
// APS-truncated ranking). Each element is a passage's "contents" field,
// split into title and text by search.SplitContents. The
// joined passages are stripped of surrounding whitespace before wrapping, as
// both reference implementations do. Observation truncation (500 tokens)
// is the rollout's job.
func FormatInformation(contents []string, f InfoFormat) string {
	var b strings.Builder
	for i, c := range contents {
		title, text := search.SplitContents(c)
		b.WriteString("Doc ")
		b.WriteString(strconv.Itoa(i + 1))
		if f == InfoSearchR1 {
			b.WriteString("(Title: ")
			b.WriteString(title)
			b.WriteString(") ")
			b.WriteString(text)
			b.WriteString("\n")
		} else {
			b.WriteString(" (Title: ")
			b.WriteString(title)
			b.WriteString(")\n")
			b.WriteString(text)
			b.WriteString("\n\n")
		}
	}
	body := pyStrip(b.String())
	if f == InfoSearchR1 {
		return "\n\n" + InformationOpen + body + InformationClose + "\n\n"
	}
	return InformationOpen + body + InformationClose
}
