package statuspage

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// sample is the dedup counters at one time, summed over the partitions.
type sample struct {
	at      time.Time
	in, dup float64
	ok      bool // dedup_messages_total had series
}

func sampleOf(at time.Time, f familyIndex) sample {
	in, ok := f.sum("dedup_messages_total", nil)
	dup, _ := f.sum("dedup_messages_total", match{{"outcome", "duplicate"}})
	return sample{at: at, in: in, dup: dup, ok: ok}
}

// The chart's drawing area in its viewBox.
const (
	chartW, chartH = 960, 200
	plotL, plotR   = 52, 948
	plotT, plotB   = 12, 172
	plotW, plotH   = plotR - plotL, plotB - plotT
)

// chart is the dedup rate chart as the template draws it.
type chart struct {
	W, H, L, R, T, B int
	MidX, MidY       int    // the middle of the drawing area
	Path             string // the rate's line, one subpath per run of steps
	Points           []point
	Grid             []mark // horizontal lines: rates
	Ticks            []mark // vertical positions: times
	Caption          string
	Latest           figure // the newest step's rate
	Empty            string // said instead of a line when there is none
}

// point is one step between two samples: the share of the records
// decided in it that were dropped as duplicates.
type point struct {
	X, Y  string
	Rate  string // the ratio, as data-rate
	At    string // the step's end, RFC 3339
	Title string
}

// mark is a grid line or an axis tick.
type mark struct {
	Pos   string
	Label string
}

func coord(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// drawChart lays out the steps between samples within span before now.
// A step without records, or one over which the counters went down (a
// partition's series deleted when it moved), leaves a gap.
func drawChart(samples []sample, now time.Time, every, span time.Duration) chart {
	c := chart{W: chartW, H: chartH, L: plotL, R: plotR, T: plotT, B: plotB, MidX: (plotL + plotR) / 2, MidY: (plotT + plotB) / 2}
	c.Caption = fmt.Sprintf("Share of the records read that were dropped as duplicates, per %s step, over the last %s.", short(every), short(span))
	type step struct {
		at       time.Time
		rate, in float64
		afterGap bool // starts a new run of the line
	}
	var steps []step
	gap := true
	var in, dup float64
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		dIn, dDup := b.in-a.in, b.dup-a.dup
		if !a.ok || !b.ok || dIn <= 0 || dDup < 0 || dDup > dIn || now.Sub(b.at) > span {
			gap = true
			continue
		}
		steps = append(steps, step{at: b.at, rate: dDup / dIn, in: dIn, afterGap: gap})
		in, dup = in+dIn, dup+dDup
		gap = false
	}
	top := 0.0
	for _, s := range steps {
		top = max(top, s.rate)
	}
	top = ceiling(top)
	for _, r := range []float64{0, top / 2, top} {
		c.Grid = append(c.Grid, mark{Pos: coord(y(r, top)), Label: percent(r)})
	}
	for _, ago := range []time.Duration{span, span / 2, 0} {
		label := "now"
		if ago > 0 {
			label = "−" + short(ago)
		}
		c.Ticks = append(c.Ticks, mark{Pos: coord(x(now.Add(-ago), now, span)), Label: label})
	}
	var path strings.Builder
	for _, s := range steps {
		px, py := coord(x(s.at, now, span)), coord(y(s.rate, top))
		cmd := "L"
		if s.afterGap {
			cmd = "M"
		}
		fmt.Fprintf(&path, "%s%s %s ", cmd, px, py)
		c.Points = append(c.Points, point{
			X: px, Y: py, Rate: strconv.FormatFloat(s.rate, 'g', -1, 64), At: s.at.UTC().Format(time.RFC3339),
			Title: fmt.Sprintf("%s: %s of %s records dropped as duplicates", s.at.UTC().Format("15:04:05 UTC"), percent(s.rate), grouped(s.in)),
		})
	}
	c.Path = strings.TrimSpace(path.String())
	c.Latest = figure{ID: "rate-latest", Format: formatPercent, Text: "—"}
	switch {
	case len(steps) > 0:
		last := steps[len(steps)-1]
		c.Latest.Value, c.Latest.Has, c.Latest.Text = last.rate, true, percent(last.rate)
		c.Caption += fmt.Sprintf(" Over the chart: %s of %s records.", percent(dup/in), grouped(in))
	case len(samples) < 2:
		c.Empty = fmt.Sprintf("Collecting samples: one every %s.", short(every))
	default:
		c.Empty = fmt.Sprintf("No records decided in the last %s.", short(span))
	}
	return c
}

// x is the horizontal position of t, span before now at the left edge.
func x(t, now time.Time, span time.Duration) float64 {
	f := 1 - float64(now.Sub(t))/float64(span)
	return plotL + plotW*min(1, max(0, f))
}

// y is the vertical position of rate r on a scale up to top.
func y(r, top float64) float64 { return plotB - plotH*r/top }

// ceiling is the top of the rate scale: the first round share at or
// above r.
func ceiling(r float64) float64 {
	for _, c := range []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8} {
		if r <= c {
			return c
		}
	}
	return 1
}

func percent(r float64) string {
	return strconv.FormatFloat(100*r, 'f', 1, 64) + "%"
}

// short is d in minutes when it is whole minutes, else in seconds.
func short(d time.Duration) string {
	if d >= time.Minute && d%time.Minute == 0 {
		return fmt.Sprintf("%d min", int(d.Minutes()))
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}
