package calibrate_test

import (
	"context"
	"fmt"

	"github.com/cas-engine/cas/calibrate"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
)

func ExampleContainsJudge() {
	hits := []search.Hit{
		{Doc: search.Doc{Contents: "\"Tombstone\"\nKurt Russell stars as Wyatt Earp."}},
		{Doc: search.Doc{Contents: "\"Mason Alan Dinehart\"\nDinehart played  Bat\nMasterson."}},
	}
	q := qa.Record{Question: "who played bat masterson", Answers: []string{"Bat Masterson"}}
	gold, _ := calibrate.ContainsJudge{}.Gold(context.Background(), q, hits)
	fmt.Println(gold, calibrate.Normalize("  Bat\n Masterson "))
	// Output: 1 bat masterson
}
