package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cas-engine/cas/internal/atomicfile"

	"github.com/schollz/progressbar/v3"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/qa"
)

// Dataset groups of the paper's Tables 1–2.
const (
	GroupGeneral  = "General QA"
	GroupMultiHop = "Multi-Hop QA"
)

// DatasetInfo names one of the paper's seven evaluation datasets.
type DatasetInfo struct {
	Name  string // canonical name, as in FlashRAG's file names
	Label string // column label in the tables
	Group string // GroupGeneral or GroupMultiHop
}

// PaperDatasets returns the seven datasets of the paper's Tables 1–2 in
// column order: NQ, TriviaQA, PopQA (General QA), HotpotQA,
// 2WikiMultihopQA, MuSiQue, Bamboogle (Multi-Hop QA).
func PaperDatasets() []DatasetInfo {
	return []DatasetInfo{
		{"nq", "NQ", GroupGeneral},
		{"triviaqa", "TriviaQA", GroupGeneral},
		{"popqa", "PopQA", GroupGeneral},
		{"hotpotqa", "HotpotQA", GroupMultiHop},
		{"2wikimultihopqa", "2Wiki", GroupMultiHop},
		{"musique", "MuSiQue", GroupMultiHop},
		{"bamboogle", "Bamboogle", GroupMultiHop},
	}
}

// datasetAliases maps other spellings of the dataset names to FlashRAG's.
var datasetAliases = map[string]string{
	"naturalquestions": "nq", "natural": "nq", "tqa": "triviaqa", "trivia": "triviaqa",
	"hotpot": "hotpotqa", "2wiki": "2wikimultihopqa", "2wikimqa": "2wikimultihopqa",
	"2wikimultihop": "2wikimultihopqa", "wikimultihopqa": "2wikimultihopqa",
}

// DatasetName derives a dataset's name from its file name: the lowercased
// base name up to the first '_', '-' or '.', e.g. nq_test_1k.jsonl → nq,
// 2wikimultihopqa_dev.jsonl → 2wikimultihopqa. known tells whether it is one
// of the paper's seven (after aliases such as 2wiki and tqa); an unknown
// name is the stem itself.
func DatasetName(path string) (name string, known bool) {
	base := strings.ToLower(filepath.Base(path))
	stem := base
	if i := strings.IndexAny(base, "_-."); i > 0 {
		stem = base[:i]
	}
	if a, ok := datasetAliases[stem]; ok {
		stem = a
	}
	for _, d := range PaperDatasets() {
		if d.Name == stem {
			return stem, true
		}
	}
	return stem, false
}

// Dataset is one QA file to evaluate.
type Dataset struct {
	Name      string
	Path      string
	Questions []qa.Record
}

// LoadDataset reads a FlashRAG/Search-R1 QA file ({"id", "question",
// "golden_answers"} per line) and keeps its first limit questions (0: all).
// An empty file, a malformed line, a missing field, a blank question or no
// golden answer is an error naming file:line (qa.Load).
func LoadDataset(path string, limit int) (Dataset, error) {
	if limit < 0 {
		return Dataset{}, fmt.Errorf("limit %d < 0", limit)
	}
	qs, err := qa.Load(path)
	if err != nil {
		return Dataset{}, err
	}
	if limit > 0 && len(qs) > limit {
		qs = qs[:limit]
	}
	name, _ := DatasetName(path)
	return Dataset{Name: name, Path: path, Questions: qs}, nil
}

// LoadDatasets loads several QA files; two files of the same dataset are an
// error.
func LoadDatasets(paths []string, limit int) ([]Dataset, error) {
	if len(paths) == 0 {
		return nil, errors.New("no QA files")
	}
	seen := map[string]string{}
	out := make([]Dataset, 0, len(paths))
	for _, p := range paths {
		d, err := LoadDataset(p, limit)
		if err != nil {
			return nil, err
		}
		if prev, ok := seen[d.Name]; ok {
			return nil, fmt.Errorf("%s and %s are both dataset %q", prev, p, d.Name)
		}
		seen[d.Name] = p
		out = append(out, d)
	}
	return out, nil
}

// EvalOptions describe an evaluation run.
type EvalOptions struct {
	// Batch is the number of questions rolled out together (default 32).
	Batch int
	// Model and Retrieval label the report (a model folder, an index or
	// server).
	Model     string
	Retrieval string
	// Progress, when set, receives a progress bar over all questions.
	Progress io.Writer
}

// Record is one evaluated question as saved to trajectories.jsonl.
type Record struct {
	Dataset        string             `json:"dataset"`
	ID             string             `json:"id"`
	Question       string             `json:"question"`
	Golds          []string           `json:"golden_answers"`
	Prediction     string             `json:"prediction"`
	EM             bool               `json:"em"`
	FormatValid    bool               `json:"format_valid"`
	HasAnswer      bool               `json:"has_answer"`
	Reward         float64            `json:"reward"`
	Turns          int                `json:"turns"`
	Finish         agent.Finish       `json:"finish"`
	Searches       []agent.SearchCall `json:"searches"`
	PromptTokens   int                `json:"prompt_tokens"`
	ResponseTokens int                `json:"response_tokens"`
	Response       string             `json:"response"`
	Observations   []agent.Span       `json:"observations,omitempty"`
	AnswerSpan     [2]int             `json:"answer_span"`
}

// DatasetResult aggregates one dataset.
type DatasetResult struct {
	Name  string `json:"name"`
	Label string `json:"label"`
	Group string `json:"group,omitempty"` // empty for datasets outside the paper's seven
	File  string `json:"file"`
	N     int    `json:"n"`
	// EM is the exact-match accuracy (the paper's metric).
	EM float64 `json:"em"`
	// MeanSearches is the mean number of executed searches per question;
	// DocsPerSearch the mean number of passages appended per search (APS's
	// effect; 0 without searches).
	MeanSearches  float64 `json:"mean_searches"`
	DocsPerSearch float64 `json:"docs_per_search"`
	// FormatValid is the fraction of responses following the grammar of
	// Eq. 5; AnswerRate the fraction with an <answer>.
	FormatValid float64 `json:"format_valid"`
	AnswerRate  float64 `json:"answer_rate"`
	MeanTurns   float64 `json:"mean_turns"`
	MeanReward  float64 `json:"mean_reward"`
	// MeanResponseTokens counts generated and appended tokens.
	MeanResponseTokens float64              `json:"mean_response_tokens"`
	Finish             map[agent.Finish]int `json:"finish"`
	Seconds            float64              `json:"seconds"`

	searches, docs, valid int
}

// Report is the result of an evaluation, in the layout of the paper's
// Tables 1–2.
type Report struct {
	Model     string              `json:"model"`
	Mode      string              `json:"mode"`
	Retrieval string              `json:"retrieval"`
	Settings  agent.RolloutConfig `json:"settings"`
	Datasets  []DatasetResult     `json:"datasets"`
	// GeneralQA, MultiHopQA and Overall are the macro averages of EM over
	// the paper's datasets present (nil when none); Missing lists the paper's
	// datasets not evaluated, which makes an average partial.
	GeneralQA  *float64 `json:"general_qa_em"`
	MultiHopQA *float64 `json:"multi_hop_qa_em"`
	Overall    *float64 `json:"overall_em"`
	Missing    []string `json:"missing,omitempty"`
	// Totals over all questions.
	N             int     `json:"n"`
	MeanSearches  float64 `json:"mean_searches"`
	DocsPerSearch float64 `json:"docs_per_search"`
	FormatValid   float64 `json:"format_valid"`
	Seconds       float64 `json:"seconds"`
}

// Eval rolls out every question of every dataset greedily or as the runner
// is configured (one trajectory per question, opts.Batch questions at a
// time), writes one Record per question to records (JSONL; nil: none) and
// aggregates EM and the search statistics per dataset, per group and
// overall (paper Tables 1–2).
func Eval(ctx context.Context, r *agent.Runner, datasets []Dataset, opts EvalOptions, records io.Writer) (*Report, error) {
	if len(datasets) == 0 {
		return nil, errors.New("eval: no datasets")
	}
	batch := opts.Batch
	if batch <= 0 {
		batch = 32
	}
	start := time.Now()
	total := 0
	for _, d := range datasets {
		if len(d.Questions) == 0 {
			return nil, fmt.Errorf("eval: %s has no questions", d.Path)
		}
		total += len(d.Questions)
	}
	var bar *progressbar.ProgressBar
	if opts.Progress != nil {
		bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(opts.Progress),
			progressbar.OptionSetDescription("eval"), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("questions"), progressbar.OptionClearOnFinish())
		prev := r.OnDone
		r.OnDone = func(t *agent.Trajectory) {
			if prev != nil {
				prev(t)
			}
			_ = bar.Add(1)
		}
		defer func() { r.OnDone = prev; _ = bar.Finish() }()
	}
	cfg := r.Config()
	rep := &Report{Model: opts.Model, Mode: cfg.Mode.String(), Retrieval: opts.Retrieval, Settings: cfg}
	enc := json.NewEncoder(io.Discard)
	if records != nil {
		enc = json.NewEncoder(records)
	}
	enc.SetEscapeHTML(false)
	var allSearch, allDocs, allValid int
	for _, d := range datasets {
		res, err := evalDataset(ctx, r, d, batch, enc)
		if err != nil {
			return nil, err
		}
		rep.Datasets = append(rep.Datasets, res)
		rep.N += res.N
		allSearch += res.searches
		allDocs += res.docs
		allValid += res.valid
	}
	rep.MeanSearches = float64(allSearch) / float64(rep.N)
	if allSearch > 0 {
		rep.DocsPerSearch = float64(allDocs) / float64(allSearch)
	}
	rep.FormatValid = float64(allValid) / float64(rep.N)
	rep.average()
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// evalDataset rolls out one dataset in batches.
func evalDataset(ctx context.Context, r *agent.Runner, d Dataset, batch int, enc *json.Encoder) (DatasetResult, error) {
	start := time.Now()
	res := DatasetResult{Name: d.Name, Label: d.Name, File: d.Path, N: len(d.Questions), Finish: map[agent.Finish]int{}}
	for _, info := range PaperDatasets() {
		if info.Name == d.Name {
			res.Label, res.Group = info.Label, info.Group
		}
	}
	var em, answered, turns, respTok int
	var reward float64
	for lo := 0; lo < len(d.Questions); lo += batch {
		part := d.Questions[lo:min(lo+batch, len(d.Questions))]
		trajs, err := r.Run(ctx, part, 1, uint64(lo))
		if err != nil {
			return res, fmt.Errorf("eval %s (questions %d–%d): %w", d.Path, lo+1, lo+len(part), err)
		}
		for i, t := range trajs {
			q := part[i]
			if t.EM {
				em++
			}
			if t.Outcome.Valid {
				res.valid++
			}
			if t.Outcome.HasAnswer {
				answered++
			}
			turns += t.Turns
			reward += t.Outcome.Reward
			respTok += len(t.IDs) - t.PromptLen
			res.Finish[t.Finish]++
			for _, s := range t.Searches {
				res.searches++
				res.docs += len(s.Kept)
			}
			rec := Record{
				Dataset: d.Name, ID: q.ID, Question: q.Question, Golds: q.Answers,
				Prediction: t.Prediction, EM: t.EM, FormatValid: t.Outcome.Valid, HasAnswer: t.Outcome.HasAnswer,
				Reward: t.Outcome.Reward, Turns: t.Turns, Finish: t.Finish, Searches: t.Searches,
				PromptTokens: t.PromptLen, ResponseTokens: len(t.IDs) - t.PromptLen, Response: t.Response,
				Observations: t.Observations, AnswerSpan: t.AnswerSpan,
			}
			if err := enc.Encode(rec); err != nil {
				return res, fmt.Errorf("eval %s: write trajectory: %w", d.Path, err)
			}
		}
	}
	n := float64(res.N)
	res.EM = float64(em) / n
	res.FormatValid = float64(res.valid) / n
	res.AnswerRate = float64(answered) / n
	res.MeanTurns = float64(turns) / n
	res.MeanReward = reward / n
	res.MeanResponseTokens = float64(respTok) / n
	res.MeanSearches = float64(res.searches) / n
	if res.searches > 0 {
		res.DocsPerSearch = float64(res.docs) / float64(res.searches)
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// average fills the group and overall macro averages (the mean of the
// datasets' EM, as the paper's Avg. columns) and the missing datasets.
func (rep *Report) average() {
	sums := map[string]float64{}
	counts := map[string]int{}
	byName := map[string]bool{}
	for _, d := range rep.Datasets {
		byName[d.Name] = true
		if d.Group == "" {
			continue
		}
		sums[d.Group] += d.EM
		counts[d.Group]++
		sums[""] += d.EM
		counts[""]++
	}
	avg := func(g string) *float64 {
		if counts[g] == 0 {
			return nil
		}
		v := sums[g] / float64(counts[g])
		return &v
	}
	rep.GeneralQA, rep.MultiHopQA, rep.Overall = avg(GroupGeneral), avg(GroupMultiHop), avg("")
	rep.Missing = nil
	for _, d := range PaperDatasets() {
		if !byName[d.Name] {
			rep.Missing = append(rep.Missing, d.Name)
		}
	}
}

// Markdown renders the report: the paper's Tables 1–2 row (EM per dataset,
// group averages and overall), then the per-dataset statistics.
func (rep *Report) Markdown() string {
	var b strings.Builder
	method := rep.Mode
	if rep.Model != "" {
		method = fmt.Sprintf("%s (%s)", rep.Model, rep.Mode)
	}
	fmt.Fprintf(&b, "# cas eval: %s\n\n", method)
	st := rep.Settings
	sel := fmt.Sprintf("top-%d", st.TopK)
	if st.APS != nil {
		sel = fmt.Sprintf("APS (q̂ = %.4g, T = %g, k ∈ [%d, %d] of %d candidates)", float64(st.APS.QHat), st.APS.Temperature,
			st.APS.MinDocs, st.APS.MaxDocs, st.Candidates)
	}
	if rep.Mode == agent.ModeDirect.String() {
		sel = "none"
	}
	fmt.Fprintf(&b, "Exact match, %d questions. Retrieval: %s; passages: %s; turns: %d (%s counting).\n\n",
		rep.N, orDash(rep.Retrieval), sel, rep.Settings.MaxTurns, rep.Settings.TurnRule)
	em := map[string]float64{}
	for _, d := range rep.Datasets {
		em[d.Name] = d.EM
	}
	cell := func(name string) string {
		if v, ok := em[name]; ok {
			return fmt.Sprintf("%.3f", v)
		}
		return "–"
	}
	avgCell := func(v *float64, group string) string {
		if v == nil {
			return "–"
		}
		s := fmt.Sprintf("%.3f", *v)
		for _, d := range PaperDatasets() {
			if _, ok := em[d.Name]; !ok && (group == "" || d.Group == group) {
				return s + "*"
			}
		}
		return s
	}
	header := []string{"Method"}
	row := []string{method}
	for _, group := range []string{GroupGeneral, GroupMultiHop} {
		for _, d := range PaperDatasets() {
			if d.Group == group {
				header = append(header, d.Label)
				row = append(row, cell(d.Name))
			}
		}
		header = append(header, group+" Avg.")
		if group == GroupGeneral {
			row = append(row, avgCell(rep.GeneralQA, group))
		} else {
			row = append(row, avgCell(rep.MultiHopQA, group))
		}
	}
	header = append(header, "Overall")
	row = append(row, avgCell(rep.Overall, ""))
	writeRow(&b, header)
	align := make([]string, len(header))
	align[0] = "---"
	for i := 1; i < len(align); i++ {
		align[i] = "---:"
	}
	writeRow(&b, align)
	writeRow(&b, row)
	if len(rep.Missing) > 0 {
		fmt.Fprintf(&b, "\n\\* average over the datasets present (missing: %s).\n", strings.Join(rep.Missing, ", "))
	}
	b.WriteString("\n")
	writeRow(&b, []string{"Dataset", "Questions", "EM", "Searches / question", "Docs / search", "Format valid", "Answer rate", "Turns", "Reward", "Response tokens"})
	writeRow(&b, []string{"---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"})
	for _, d := range rep.Datasets {
		label := d.Label
		if d.Group == "" {
			label += " (not in the paper's averages)"
		}
		writeRow(&b, []string{label, fmt.Sprint(d.N), fmt.Sprintf("%.3f", d.EM), fmt.Sprintf("%.2f", d.MeanSearches),
			fmt.Sprintf("%.2f", d.DocsPerSearch), fmt.Sprintf("%.3f", d.FormatValid), fmt.Sprintf("%.3f", d.AnswerRate),
			fmt.Sprintf("%.2f", d.MeanTurns), fmt.Sprintf("%.3f", d.MeanReward), fmt.Sprintf("%.0f", d.MeanResponseTokens)})
	}
	writeRow(&b, []string{"**all**", fmt.Sprint(rep.N), "", fmt.Sprintf("%.2f", rep.MeanSearches),
		fmt.Sprintf("%.2f", rep.DocsPerSearch), fmt.Sprintf("%.3f", rep.FormatValid), "", "", "", ""})
	return b.String()
}

func writeRow(b *strings.Builder, cells []string) {
	b.WriteString("| ")
	b.WriteString(strings.Join(cells, " | "))
	b.WriteString(" |\n")
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// Output file names in an evaluation folder.
const (
	ReportJSON       = "report.json"
	ReportMarkdown   = "report.md"
	TrajectoriesFile = "trajectories.jsonl"
)

// EvalToDir runs Eval and writes dir/trajectories.jsonl, dir/report.json
// and dir/report.md, each through a temporary file renamed into place, so an
// interrupted run leaves no half-written output.
func EvalToDir(ctx context.Context, r *agent.Runner, datasets []Dataset, opts EvalOptions, dir string) (*Report, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	trajPath := filepath.Join(dir, TrajectoriesFile)
	var rep *Report
	var evalErr error
	err := atomicfile.Write(trajPath, func(w io.Writer) error {
		rep, evalErr = Eval(ctx, r, datasets, opts, w)
		return evalErr
	})
	if evalErr != nil {
		return nil, evalErr
	}
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	if err := WriteReport(dir, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// WriteReport writes dir/report.json and dir/report.md atomically.
func WriteReport(dir string, rep *Report) error {
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("eval report: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, ReportJSON), append(js, '\n')); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, ReportMarkdown), []byte(rep.Markdown()))
}

// writeAtomic writes data to path through a temporary file and a rename.
func writeAtomic(path string, data []byte) error { return atomicfile.WriteFile(path, data) }
