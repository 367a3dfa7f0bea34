package agent

import (
	"fmt"
	"testing"
)

func TestFormatInformation(t *testing.T) {
	docs := []string{"\"Citibank\"\nThe City Bank of New York was founded in 1812.", "\"James Madison\"\nMadison was president\nfrom 1809 to 1817.  \n"}
	cases := []struct {
		f    InfoFormat
		docs []string
		want string
	}{
		{InfoCode, docs, "<information>Doc 1 (Title: Citibank)\nThe City Bank of New York was founded in 1812.\n\nDoc 2 (Title: James Madison)\nMadison was president\nfrom 1809 to 1817.</information>"},
		{InfoSearchR1, docs, "\n\n<information>Doc 1(Title: Citibank) The City Bank of New York was founded in 1812.\nDoc 2(Title: James Madison) Madison was president\nfrom 1809 to 1817.</information>\n\n"},
		{InfoCode, docs[:1], "<information>Doc 1 (Title: Citibank)\nThe City Bank of New York was founded in 1812.</information>"},
		{InfoCode, nil, "<information></information>"},
		{InfoSearchR1, nil, "\n\n<information></information>\n\n"},
	}
	for _, c := range cases {
		if got := FormatInformation(c.docs, c.f); got != c.want {
			t.Errorf("FormatInformation(%v, %d docs) =\n%q\nwant\n%q", c.f, len(c.docs), got, c.want)
		}
	}
}

// The block appended after a search keeps the trajectory inside the grammar,
// and the invalid-action message breaks it.
func TestInformationKeepsGrammar(t *testing.T) {
	for _, f := range []InfoFormat{InfoCode, InfoSearchR1} {
		r := "<think>a</think><search>q</search>" + FormatInformation([]string{docCitibank}, f) + "<think>b</think><answer>c</answer>"
		if err := CheckFormat(r); err != nil {
			t.Errorf("%v: %v", f, err)
		}
	}
	if ValidFormat("<think>a</think>" + InvalidActionMessage + "<think>b</think><answer>c</answer>") {
		t.Error("the invalid-action message left the response valid")
	}
}

func ExampleFormatInformation() {
	fmt.Printf("%q\n", FormatInformation([]string{"\"Paris\"\nParis is the capital of France."}, InfoCode))
	fmt.Printf("%q\n", FormatInformation([]string{"\"Paris\"\nParis is the capital of France."}, InfoSearchR1))
	// Output:
	// "<information>Doc 1 (Title: Paris)\nParis is the capital of France.</information>"
	// "\n\n<information>Doc 1(Title: Paris) Paris is the capital of France.</information>\n\n"
}
