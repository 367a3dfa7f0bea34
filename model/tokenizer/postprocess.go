package tokenizer

import (
	"encoding/json"
	"fmt"
)

// postProcessor adds a model's special tokens around one encoded sequence
// (Hugging Face's post_processor for a single input).
type postProcessor interface {
	process(ids []int) []int
}

type postProcessorJSON struct {
	Type string `json:"type"`
	// TemplateProcessing
	Single        []templatePieceJSON            `json:"single"`
	SpecialTokens map[string]templateSpecialJSON `json:"special_tokens"`
	// BertProcessing, RobertaProcessing: [token, id]
	Sep []json.RawMessage `json:"sep"`
	Cls []json.RawMessage `json:"cls"`
	// Sequence
	Processors []json.RawMessage `json:"processors"`
}

type templatePieceJSON struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

type templateSpecialJSON struct {
	ID  string `json:"id"`
	IDs []int  `json:"ids"`
}

func parsePostProcessor(raw json.RawMessage) (postProcessor, error) {
	j, ok, err := decodeComponent[postProcessorJSON]("post_processor", raw)
	if !ok || err != nil {
		return nil, err
	}
	switch j.Type {
	case "TemplateProcessing":
		var t templateProcessor
		for k, p := range j.Single {
			switch {
			case p.SpecialToken != nil:
				sp, ok := j.SpecialTokens[p.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("post_processor TemplateProcessing: special token %q has no ids", p.SpecialToken.ID)
				}
				t = append(t, templatePiece{ids: sp.IDs})
			case p.Sequence != nil:
				if p.Sequence.ID != "A" {
					return nil, fmt.Errorf("post_processor TemplateProcessing: single template uses sequence %q", p.Sequence.ID)
				}
				t = append(t, templatePiece{sequence: true})
			default:
				return nil, fmt.Errorf("post_processor TemplateProcessing: single[%d] is neither SpecialToken nor Sequence", k)
			}
		}
		return t, nil
	case "BertProcessing", "RobertaProcessing":
		cls, err := tokenIDPair(j.Cls)
		if err != nil {
			return nil, fmt.Errorf("post_processor %s cls: %w", j.Type, err)
		}
		sep, err := tokenIDPair(j.Sep)
		if err != nil {
			return nil, fmt.Errorf("post_processor %s sep: %w", j.Type, err)
		}
		return templateProcessor{{ids: []int{cls}}, {sequence: true}, {ids: []int{sep}}}, nil
	case "ByteLevel":
		return nil, nil
	case "Sequence":
		return parseSequence[sequenceProcessor]("post_processor", j.Processors, func(r json.RawMessage) (postProcessor, error) { return parsePostProcessor(r) })
	}
	return nil, unsupportedComponent("post_processor", j.Type)
}

// tokenIDPair reads ["[CLS]", 101] and returns the id.
func tokenIDPair(raw []json.RawMessage) (int, error) {
	if len(raw) != 2 {
		return 0, fmt.Errorf("want [token, id]")
	}
	var id int
	if err := json.Unmarshal(raw[1], &id); err != nil {
		return 0, fmt.Errorf("id: %w", err)
	}
	return id, nil
}

type templatePiece struct {
	ids      []int
	sequence bool
}

// templateProcessor lays out special-token ids and the sequence, e.g.
// [CLS] $A [SEP].
type templateProcessor []templatePiece

func (t templateProcessor) process(ids []int) []int {
	n := len(ids)
	for _, p := range t {
		n += len(p.ids)
	}
	out := make([]int, 0, n)
	for _, p := range t {
		if p.sequence {
			out = append(out, ids...)
		} else {
			out = append(out, p.ids...)
		}
	}
	return out
}

type sequenceProcessor []postProcessor

func (seq sequenceProcessor) process(ids []int) []int {
	return chain(seq, ids, postProcessor.process)
}
