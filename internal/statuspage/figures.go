package statuspage

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// family is one gathered metric family's series.
type family []*dto.Metric

// familyIndex is a gathered registry, by family name.
type familyIndex map[string]family

func families(mfs []*dto.MetricFamily) familyIndex {
	f := make(familyIndex, len(mfs))
	for _, mf := range mfs {
		f[mf.GetName()] = mf.GetMetric()
	}
	return f
}

// value is a counter's, gauge's or untyped series' value.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// match is the label pairs a figure's series hold, in order.
type match [][2]string

func (m match) with(name, value string) match {
	return append(slices.Clip(m), [2]string{name, value})
}

func (m match) holds(s *dto.Metric) bool {
	for _, p := range m {
		if label(s, p[0]) != p[1] {
			return false
		}
	}
	return true
}

// labelEscaper escapes a label value as the Prometheus text format does.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// String is the pairs as a selector's matchers: topic="events",partition="0".
func (m match) String() string {
	parts := make([]string, len(m))
	for i, p := range m {
		parts[i] = p[0] + `="` + labelEscaper.Replace(p[1]) + `"`
	}
	return strings.Join(parts, ",")
}

// sum adds up the series of name that hold every pair of m; has says
// whether there was one.
func (f familyIndex) sum(name string, m match) (total float64, has bool) {
	for _, s := range f[name] {
		if m.holds(s) {
			total += value(s)
			has = true
		}
	}
	return total, has
}

// Formats of figures, the page's data-format: how Text shows Value.
const (
	formatCount   = "count"   // an integer, digits grouped
	formatOffset  = "offset"  // an integer, digits not grouped
	formatPercent = "percent" // a ratio as a percentage, one decimal
	formatFloat   = "float"   // three significant digits
	formatBytes   = "bytes"   // IEC units
	formatAge     = "age"     // a Unix time, shown as the time since
	formatSpan    = "span"    // seconds, shown as a duration
	formatState   = "state"   // a label value (Text) whose series is 1
)

// figure is one number on the page with the series it sums.
type figure struct {
	ID     string  // the element's id, stable
	Metric string  // the family
	Match  string  // the labels its series hold (all series: empty)
	Format string  // how Text shows Value
	Value  float64 // the sum of the series
	Has    bool    // there was a series
	Text   string  // as shown
	Label  string  // what it is, where the page names it beside
}

// Raw is Value as /metrics writes it.
func (f figure) Raw() string { return strconv.FormatFloat(f.Value, 'g', -1, 64) }

// reader reads figures from one gathered registry at one time.
type reader struct {
	f   familyIndex
	now time.Time
}

func (r reader) fig(id, name string, m match, format string) figure {
	v, has := r.f.sum(name, m)
	fg := figure{ID: id, Metric: name, Match: m.String(), Format: format, Value: v, Has: has, Text: "—"}
	if has {
		fg.Text = show(v, format, r.now)
	}
	return fg
}

// show formats v as format says.
func show(v float64, format string, now time.Time) string {
	switch format {
	case formatCount:
		return grouped(math.Round(v))
	case formatOffset:
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	case formatPercent:
		return strconv.FormatFloat(100*v, 'f', 1, 64) + "%"
	case formatBytes:
		return bytesText(v)
	case formatSpan:
		return ageText(seconds(v))
	case formatAge:
		if v <= 0 {
			return "never"
		}
		return ageText(now.Sub(time.Unix(0, int64(v*1e9)))) + " ago"
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// grouped is an integer with its digits grouped by three, with narrow
// no-break spaces (readable in every locale, never wrapped).
func grouped(v float64) string {
	s := strconv.FormatFloat(math.Abs(v), 'f', 0, 64)
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString("\u202f")
		}
		b.WriteRune(c)
	}
	return b.String()
}

func bytesText(v float64) string {
	const units = "KMGTPE"
	if v < 1024 {
		return strconv.FormatFloat(v, 'f', 0, 64) + " B"
	}
	i := -1
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[i:i+1] + "iB"
}

// ageText is d to the second, in its two largest units.
func ageText(d time.Duration) string {
	d = max(0, d.Round(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// status is the stage's readiness as /readyz says it.
type status struct {
	Ready bool
	Text  string
}

func readiness(err error) *status {
	if err != nil {
		return &status{Text: "not ready: " + err.Error()}
	}
	return &status{Ready: true, Text: "ready"}
}

// view is everything the template shows.
type view struct {
	Generated             string // now, UTC
	Version, Commit, Mode string // dedup_build_info's labels
	Readiness             *status
	Connected             figure // dedup_broker_connected
	Embedded              bool
	Missing               []string // topics dedup_topic_missing names
	Assigned              figure

	In         figure   // every outcome
	Outcomes   []figure // by outcome, those with series
	Rate       figure   // duplicates over In (derived, no family)
	FalseDrops figure

	Window, ExpectedKeys, FPTarget figure

	Partitions []partitionView
	Restores   []figure // dedup_restores_total by source

	Chart chart
	Probe string // the probe form's action; empty: no form
	// KeyParts: the probe form's fields, one per source of a composite
	// key; nil: one field for the key.
	KeyParts []string
	Errors   []string
}

// partitionView is one input partition's row in each table.
type partitionView struct {
	Topic, Partition string

	Position, Committed, Lag                   figure
	In, Forwarded, Dropped, Retracted, Unkeyed figure
	FalseDrops                                 figure
	Waiting                                    bool // dedup_key_waiting

	Generations [2]generationView
	Elapsed     figure
	Into, Left  string // the current window's time elapsed and to go

	Checkpoint, Base, Increments, Stored, Failures figure
	Source                                         figure
}

// generationView is one filter generation of a partition.
type generationView struct {
	Name               string
	Fill, Keys, FPRate figure
}

// The outcomes of dedup_messages_total the page names, in its order
// (In sums every outcome, these and any other); rare ones only once
// they happened.
var outcomes = []struct {
	name, label string
	rare        bool
}{
	{"forwarded", "forwarded", false}, {"duplicate", "dropped as duplicates", false}, {"retraction", "retractions", false},
	{"unkeyed", "unkeyed", false}, {"dead_lettered", "dead-lettered", true}, {"refused", "refused", true},
}

// partitionFamilies are the dedup hop's per-partition families whose
// series name the partitions the page lists.
var partitionFamilies = []string{"dedup_messages_total", "dedup_consumer_position", "dedup_consumer_lag", "dedup_filter_fill_ratio"}

// read is the page's view of the gathered registry f at now.
func read(f familyIndex, now time.Time) view {
	r := reader{f: f, now: now}
	v := view{Generated: now.UTC().Format("2006-01-02 15:04:05 UTC")}
	if b := f["dedup_build_info"]; len(b) > 0 {
		v.Version, v.Commit, v.Mode = label(b[0], "version"), label(b[0], "commit"), label(b[0], "mode")
	}
	v.Connected = r.fig("broker-connected", "dedup_broker_connected", nil, formatState)
	if v.Connected.Has {
		v.Connected.Text = map[bool]string{true: "connected", false: "not reachable"}[v.Connected.Value > 0]
	}
	if e, _ := f.sum("dedup_embedded_broker", nil); e > 0 {
		v.Embedded = true
	}
	for _, s := range f["dedup_topic_missing"] {
		if value(s) > 0 {
			v.Missing = append(v.Missing, label(s, "topic"))
		}
	}
	v.Assigned = r.fig("assigned", "dedup_assigned_partitions", nil, formatCount)

	const messages = "dedup_messages_total"
	v.In = r.fig("total-in", messages, nil, formatCount)
	for _, o := range outcomes {
		if fg := r.fig("total-"+o.name, messages, match{{"outcome", o.name}}, formatCount); fg.Has && (fg.Value > 0 || !o.rare) {
			fg.Label = o.label
			v.Outcomes = append(v.Outcomes, fg)
		}
	}
	dup, _ := f.sum(messages, match{{"outcome", "duplicate"}})
	v.Rate = figure{ID: "total-dedup-rate", Format: formatPercent, Text: "—"}
	if v.In.Value > 0 {
		v.Rate.Value, v.Rate.Has = dup/v.In.Value, true
		v.Rate.Text = show(v.Rate.Value, formatPercent, now)
	}
	v.FalseDrops = r.fig("total-expected-false-drops", "dedup_expected_false_drops_total", nil, formatFloat)

	v.Window = r.fig("window", "dedup_filter_window_seconds", nil, formatSpan)
	v.ExpectedKeys = r.fig("expected-keys", "dedup_filter_expected_keys", nil, formatCount)
	v.FPTarget = r.fig("fp-target", "dedup_filter_false_positive_target", nil, formatFloat)

	for _, p := range partitionsOf(f) {
		v.Partitions = append(v.Partitions, r.partition(p[0], p[1], v.Window.Value))
	}
	for _, s := range f["dedup_restores_total"] {
		src := label(s, "source")
		fg := r.fig("restores-"+src, "dedup_restores_total", match{{"source", src}}, formatCount)
		fg.Label = src
		v.Restores = append(v.Restores, fg)
	}
	return v
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// partitionsOf lists the (topic, partition) pairs of the dedup hop's
// series, by topic and partition number.
func partitionsOf(f familyIndex) [][2]string {
	seen := map[[2]string]bool{}
	var out [][2]string
	for _, name := range partitionFamilies {
		for _, s := range f[name] {
			p := [2]string{label(s, "topic"), label(s, "partition")}
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b [2]string) int {
		an, _ := strconv.Atoi(a[1])
		bn, _ := strconv.Atoi(b[1])
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(an, bn), cmp.Compare(a[1], b[1]))
	})
	return out
}

func (r reader) partition(topic, part string, window float64) partitionView {
	m := match{{"topic", topic}, {"partition", part}}
	id := func(what string) string { return "p-" + topic + "-" + part + "-" + what }
	const messages = "dedup_messages_total"
	p := partitionView{
		Topic: topic, Partition: part,
		Position:   r.fig(id("position"), "dedup_consumer_position", m, formatOffset),
		Committed:  r.fig(id("committed"), "dedup_committed_offset", m, formatOffset),
		Lag:        r.fig(id("lag"), "dedup_consumer_lag", m, formatCount),
		In:         r.fig(id("in"), messages, m, formatCount),
		Forwarded:  r.fig(id("forwarded"), messages, m.with("outcome", "forwarded"), formatCount),
		Dropped:    r.fig(id("duplicate"), messages, m.with("outcome", "duplicate"), formatCount),
		Retracted:  r.fig(id("retraction"), messages, m.with("outcome", "retraction"), formatCount),
		Unkeyed:    r.fig(id("unkeyed"), messages, m.with("outcome", "unkeyed"), formatCount),
		FalseDrops: r.fig(id("expected-false-drops"), "dedup_expected_false_drops_total", m, formatFloat),
		Elapsed:    r.fig(id("window-elapsed"), "dedup_filter_window_elapsed_ratio", m, formatPercent),
		Checkpoint: r.fig(id("checkpoint-last"), "dedup_checkpoint_last_success_timestamp_seconds", m, formatAge),
		Base:       r.fig(id("chain-base"), "dedup_checkpoint_chain_base_timestamp_seconds", m, formatAge),
		Increments: r.fig(id("chain-increments"), "dedup_checkpoint_chain_increments", m, formatCount),
		Stored:     r.fig(id("checkpoint-stored"), "dedup_checkpoint_size_bytes", m.with("kind", "stored"), formatBytes),
		Failures:   r.fig(id("checkpoint-failures"), "dedup_checkpoint_failures_total", m, formatCount),
	}
	if w, _ := r.f.sum("dedup_key_waiting", m); w > 0 {
		p.Waiting = true
	}
	for i, g := range [2]string{"current", "previous"} {
		gm := m.with("generation", g)
		p.Generations[i] = generationView{
			Name:   g,
			Fill:   r.fig(id(g+"-fill"), "dedup_filter_fill_ratio", gm, formatPercent),
			Keys:   r.fig(id(g+"-keys"), "dedup_filter_estimated_keys", gm, formatCount),
			FPRate: r.fig(id(g+"-fp"), "dedup_filter_false_positive_rate", gm, formatFloat),
		}
	}
	if p.Elapsed.Has && window > 0 {
		into := seconds(p.Elapsed.Value * window)
		p.Into, p.Left = ageText(into), ageText(seconds(window)-into)
	}
	p.Source = figure{ID: id("restore-source"), Metric: "dedup_restore_source", Match: m.String(), Format: formatState, Text: "—"}
	for _, s := range r.f["dedup_restore_source"] {
		if m.holds(s) && value(s) == 1 {
			src := label(s, "source")
			p.Source = r.fig(id("restore-source"), "dedup_restore_source", m.with("source", src), formatState)
			p.Source.Text = src
		}
	}
	return p
}
