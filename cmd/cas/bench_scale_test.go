package main

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBenchScaleCommand runs `cas bench scale` on two tiny sizes through
// the built binary (each configuration in its own child process) and
// checks the table a user reads: one row per size × configuration with
// every column filled, exact recall for the flat F32 file, the 21M
// projection and the verdicts; and that a bad size is a clear error.
func TestBenchScaleCommand(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCasBin(t, dir, 2*time.Minute, "bench", "scale", "--sizes", "2k,4k",
		"--dim", "64", "--rank", "8", "--pq", "8", "--rerank", "40", "--nprobe", "8",
		"--batch", "64", "--recall-queries", "20", "--threads", "2")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	header := "| N | config | build s | build peak GiB | index file GiB | serve peak GiB | single ms | batch q/s | recall@10 |"
	if !strings.Contains(out, header) {
		t.Fatalf("no table header in:\n%s", out)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.Trim(line, "| "), " | ")
		if len(f) == 9 && (f[0] == "2k" || f[0] == "4k") {
			rows[f[0]+" "+f[1]] = f
		}
	}
	for _, n := range []string{"2k", "4k"} {
		for _, c := range []string{"flat-f32", "flat-f16", "flat-sq8", "ivf-sq8 (nprobe 8)", "ivfpq-rerank (nprobe 8, PQ8, re-rank 40)"} {
			f, ok := rows[n+" "+c]
			if !ok {
				t.Fatalf("no row for %s %s in:\n%s", n, c, out)
			}
			for i, v := range f[2:] {
				x, err := strconv.ParseFloat(strings.Fields(v)[0], 64)
				if err != nil || x < 0 {
					t.Fatalf("%s %s column %d = %q", n, c, i+2, v)
				}
			}
			rec, _ := strconv.ParseFloat(f[8], 64)
			qps, _ := strconv.ParseFloat(f[7], 64)
			switch {
			case c == "flat-f32" && rec != 1:
				t.Fatalf("%s flat-f32 recall@10 = %v, want 1 (it is the exact search)", n, rec)
			case rec < 0.5:
				t.Fatalf("%s %s recall@10 = %v", n, c, rec)
			case qps <= 0:
				t.Fatalf("%s %s batch q/s = %v", n, c, qps)
			}
		}
	}
	for _, want := range []string{"#### Projection to 21M", "| flat-f32 |", "24 GB / 2-core", "64 GB / 32-core", "GRPO step (2560 q)", "vectest.E5MixGen"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("the work folder was left behind: %v", entries)
	}
	code, _, errOut = runCasBin(t, dir, time.Minute, "bench", "scale", "--sizes", "2x")
	if code == 0 || !strings.Contains(errOut, `--sizes: "2x"`) {
		t.Fatalf("bad --sizes: exit %d, stderr %s", code, errOut)
	}
	for _, bad := range [][]string{{"--gen", "nope"}, {"--pq", "7"}, {"--rerank", "0"}} {
		code, _, errOut = runCasBin(t, dir, time.Minute, append([]string{"bench", "scale", "--sizes", "2k", "--dim", "64"}, bad...)...)
		if code == 0 || !strings.Contains(errOut, bad[0]) {
			t.Fatalf("%v: exit %d, stderr %s", bad, code, errOut)
		}
	}
}

// TestBenchScaleSweepAndDisk: --nprobe and --rerank lists give one row
// per setting from one IVF-PQ build, recall grows with them, the old
// low-rank generator is still selectable, and a flat index larger than
// --ram-gib is timed on one query from disk instead of its batch and
// recall.
func TestBenchScaleSweepAndDisk(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCasBin(t, dir, 2*time.Minute, "bench", "scale", "--sizes", "3k", "--gen", "lowrank",
		"--dim", "64", "--rank", "8", "--pq", "16", "--rerank", "10,60", "--nprobe", "2,16", "--configs", "flat-f32,ivfpq-rerank",
		"--batch", "64", "--recall-queries", "20", "--threads", "2", "--ram-gib", "0.0001")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	rec := map[string]float64{}
	var disk string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(strings.Trim(line, "| "), " | ")
		if len(f) != 9 || f[0] != "3k" {
			continue
		}
		if f[1] == "flat-f32" {
			disk = line
			continue
		}
		rec[f[1]], _ = strconv.ParseFloat(f[8], 64)
	}
	if !strings.Contains(disk, "exceeds RAM:") || !strings.Contains(disk, "| — | — |") {
		t.Fatalf("flat-f32 over --ram-gib: %q", disk)
	}
	lo, hi := rec["ivfpq-rerank (nprobe 2, PQ16, re-rank 10)"], rec["ivfpq-rerank (nprobe 16, PQ16, re-rank 60)"]
	if len(rec) != 4 || hi < lo+0.1 || hi < 0.8 {
		t.Fatalf("sweep rows %v: want 4, recall rising from (2, 10) to (16, 60) by ≥ 0.1 to ≥ 0.8\n%s", rec, out)
	}
	if !strings.Contains(out, "vectest.LowRankGen") {
		t.Fatalf("the table does not say which set it measured:\n%s", out)
	}
}
