package agent

import (
	"fmt"
	"strconv"
	"strings"
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

// String gives the flag spelling of the format.
func (f InfoFormat) String() string {
	if f == InfoSearchR1 {
		return "search-r1"
	}
	return "code"
}

// MarshalText encodes the format by its flag spelling.
func (f InfoFormat) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText decodes an information-format flag (ParseInfoFormat).
func (f *InfoFormat) UnmarshalText(b []byte) error { return unmarshalEnum(f, ParseInfoFormat, b) }

// ParseInfoFormat reads an information-format flag: "code" or "search-r1".
func ParseInfoFormat(s string) (InfoFormat, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "code", "cas", "":
		return InfoCode, nil
	case "search-r1", "searchr1":
		return InfoSearchR1, nil
	}
	return 0, fmt.Errorf("unknown information format %q (want code or search-r1)", s)
}

// SplitContents splits a corpus passage's "contents" field into its title
// (the first line, with surrounding double quotes stripped: wiki-18 stores
// `"Title"\ntext`) and its text (the remaining lines, joined by "\n").
func SplitContents(contents string) (title, text string) {
	title, text, _ = strings.Cut(contents, "\n")
	return strings.Trim(title, `"`), text
}

// FormatInformation renders the information block appended after a search
// turn, numbering the passages "Doc 1", "Doc 2", … in the order given (the
// APS-truncated ranking). Each element is a passage's "contents" field. The
// joined passages are stripped of surrounding whitespace before wrapping, as
// both reference implementations do. Observation truncation (500 tokens)
// is the rollout's job.
func FormatInformation(contents []string, f InfoFormat) string {
	var b strings.Builder
	for i, c := range contents {
		title, text := SplitContents(c)
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
