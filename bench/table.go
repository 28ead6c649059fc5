package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// WriteTable writes one run's results as a Markdown table, with each figure's
// ratio to the stage in counting mode.
func WriteTable(w io.Writer, r Report) error {
	ref, hasRef := r.Outcome(StageCounting)
	rows := [][]string{{
		"contender", "records/s", "vs stage-counting", "vs copy: records/s, per CPU s", "peak RSS", "vs stage-counting",
		"RSS over copy / key", "state / key", "dups dropped", "false drops", "dups forwarded",
	}}
	for _, o := range r.Outcomes {
		row := []string{
			o.Name,
			count(o.RecordsPerSecond()),
			ratio(o.RecordsPerSecond(), ref.RecordsPerSecond(), hasRef),
			vsCopy(r, o),
			mib(o.PeakRSS),
			ratio(float64(o.PeakRSS), float64(ref.PeakRSS), hasRef),
			rssPerKey(r, o),
			statePerKey(r, o),
			fmt.Sprint(o.Verify.DupsDropped),
			fmt.Sprintf("%d (%s)", o.Verify.FalseDrops, percent(float64(o.Verify.FalseDrops), float64(r.Firsts))),
			fmt.Sprint(o.Verify.DupForwarded + o.Verify.Repeated),
		}
		rows = append(rows, row)
	}
	return writeMarkdown(w, rows)
}

// roundsRatio is the median over the rounds of a contender's figure over
// the copy loop's in the same round (one run of each per round, in turn),
// and how many rounds: on a shared machine a round's ratio scatters less
// than the figures themselves.
func roundsRatio(of, copies []float64) string {
	var rs []float64
	for i := range min(len(of), len(copies)) {
		if copies[i] > 0 && of[i] > 0 {
			rs = append(rs, of[i]/copies[i])
		}
	}
	if len(rs) == 0 {
		return "—"
	}
	slices.Sort(rs)
	m := rs[len(rs)/2]
	if len(rs)%2 == 0 {
		m = (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
	}
	if len(rs) == 1 {
		return fmt.Sprintf("%.3f", m)
	}
	return fmt.Sprintf("%.3f (median of %d)", m, len(rs))
}

// WriteSweep writes the runs of a sweep as one Markdown table, one row per
// distinct-key count and contender.
func WriteSweep(w io.Writer, reports []Report) error {
	rows := [][]string{{
		"distinct keys", "records", "contender", "records/s", "vs stage-counting",
		"peak RSS", "vs exact-set", "RSS over copy / key", "state / key", "false drops",
	}}
	for _, r := range reports {
		ref, hasRef := r.Outcome(StageCounting)
		exact, hasExact := r.Outcome(ExactSet)
		for _, o := range r.Outcomes {
			row := []string{
				count(float64(r.Workload.Keys)), count(float64(r.Workload.Records)), o.Name,
				count(o.RecordsPerSecond()),
				ratio(o.RecordsPerSecond(), ref.RecordsPerSecond(), hasRef),
				mib(o.PeakRSS),
				ratio(float64(o.PeakRSS), float64(exact.PeakRSS), hasExact),
				rssPerKey(r, o), statePerKey(r, o),
				percent(float64(o.Verify.FalseDrops), float64(r.Firsts)),
			}
			rows = append(rows, row)
		}
	}
	return writeMarkdown(w, rows)
}

// rssPerKey is o's peak RSS over the copy loop's per distinct key; "—"
// for the copy loop itself or when it did not run.
// vsCopy is o's records/s and records per CPU second against the copy
// loop's, each the median of per-round ratios; "—" for the copy loop.
func vsCopy(r Report, o Outcome) string {
	base, ok := r.Outcome(Copy)
	if !ok || o.Name == Copy {
		return "—"
	}
	return fmt.Sprintf("%s, %s", roundsRatio(o.Rates, base.Rates), roundsRatio(o.CPURates, base.CPURates))
}

func rssPerKey(r Report, o Outcome) string {
	base, ok := r.Outcome(Copy)
	if !ok || o.Name == Copy {
		return "—"
	}
	return fmt.Sprintf("%.1f B", float64(o.PeakRSS-base.PeakRSS)/float64(r.Workload.Keys))
}

// statePerKey is o's checkpointed state per distinct key; "—" for a
// contender that keeps none.
func statePerKey(r Report, o Outcome) string {
	if o.StateHow == "none" {
		return "—"
	}
	return fmt.Sprintf("%.1f B", float64(o.StateBytes)/float64(r.Workload.Keys))
}

func writeMarkdown(w io.Writer, rows [][]string) error {
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	line := func(row []string) {
		b.WriteString("|")
		for i, c := range row {
			pad := widths[i] - len([]rune(c))
			if i == 0 {
				fmt.Fprintf(&b, " %s%s |", c, strings.Repeat(" ", pad))
			} else {
				fmt.Fprintf(&b, " %s%s |", strings.Repeat(" ", pad), c)
			}
		}
		b.WriteString("\n")
	}
	line(rows[0])
	b.WriteString("|")
	for i, wd := range widths {
		if i == 0 {
			b.WriteString(" " + strings.Repeat("-", wd) + " |")
		} else {
			b.WriteString(" " + strings.Repeat("-", wd-1) + ": |")
		}
	}
	b.WriteString("\n")
	for _, row := range rows[1:] {
		line(row)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func ratio(a, b float64, ok bool) string {
	if !ok || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func percent(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.4f%%", 100*a/b)
}
