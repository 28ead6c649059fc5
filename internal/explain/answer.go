package explain

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"dedup/processor/partition"
	"dedup/processor/repartition"
)

// Answer is what one partition's filters say of a key: a line of `dedup
// explain --json`, an element of the key probe's answer.
type Answer struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Held      bool   `json:"held"`
	// Generation is the first generation holding the key, in the order
	// the stage asks them (current, previous, legacy-current,
	// legacy-previous), or "none".
	Generation string   `json:"generation"`
	Windows    []Window `json:"windows"`
	// FalsePositive is the chance that a key never seen reads as held by
	// these filters (1-(1-c)(1-p) over the generations).
	FalsePositive float64 `json:"false_positive"`
	// Checkpoint is the checkpoint asked (dedup explain); nil for a
	// partition without one, and for the live probe.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Position is the input offset the live filters cover (the probe):
	// every record below it is decided.
	Position *int64 `json:"position,omitempty"`
	// KeyPartition, with REPARTITION_TOPIC, says whether hop 1 routes the
	// key to this partition: only that partition's filters can hold it.
	KeyPartition *bool `json:"key_partition,omitempty"`
	// Note says what limits the answer (no checkpoint, a chain cut short,
	// no answer from a worker).
	Note string `json:"note,omitempty"`
}

// Window is one generation's answer.
type Window struct {
	Generation string `json:"generation"`
	Held       bool   `json:"held"`
	// Start and End bound the event-time window the generation covers;
	// null before any record.
	Start         *time.Time `json:"start"`
	End           *time.Time `json:"end"`
	FalsePositive float64    `json:"false_positive"`
}

// Checkpoint names the checkpoint an answer comes from: its chain's head.
type Checkpoint struct {
	Offset     int64     `json:"offset"` // every input below it is in the filters
	Seq        uint64    `json:"seq"`
	Base       uint64    `json:"base"`       // the chain's base (its own seq for a base)
	Increments int       `json:"increments"` // applied on the base
	Created    time.Time `json:"created"`
	AgeSeconds float64   `json:"age_seconds"`
}

// NewAnswer is partition part of topic's answer a.
func NewAnswer(topic string, part int, a partition.KeyAnswer) Answer {
	out := Answer{Topic: topic, Partition: part, Held: a.Held, Generation: a.Generation,
		FalsePositive: a.FalsePositive, Windows: []Window{}}
	if out.Generation == "" {
		out.Generation = "none"
	}
	for _, g := range a.Generations {
		w := Window{Generation: g.Generation, Held: g.Held, FalsePositive: g.FalsePositive}
		if !g.Start.IsZero() {
			start, end := g.Start, g.Start.Add(g.Window)
			w.Start, w.End = &start, &end
		}
		out.Windows = append(out.Windows, w)
	}
	return out
}

// MarkKeyPartition marks, of answers of a topic with partitions partitions
// that hop 1 fills by the dedup key (REPARTITION_TOPIC), the partition
// key is routed to; the others cannot hold it (a key held there is a
// false positive). It returns that partition.
func MarkKeyPartition(answers []Answer, key []byte, partitions int) int {
	p := repartition.KeyPartition(key, partitions)
	for i := range answers {
		here := answers[i].Partition == p
		answers[i].KeyPartition = &here
	}
	return p
}

// WriteJSON writes one JSON object a line, one per answer.
func WriteJSON(w io.Writer, answers []Answer) error {
	enc := json.NewEncoder(w)
	for _, a := range answers {
		if err := enc.Encode(a); err != nil {
			return fmt.Errorf("write answer: %w", err)
		}
	}
	return nil
}

// WriteText writes a line per answer.
func WriteText(w io.Writer, answers []Answer) {
	for _, a := range answers {
		fmt.Fprintln(w, textLine(a))
	}
}

func textLine(a Answer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d: ", a.Topic, a.Partition)
	switch {
	case a.Held:
		fmt.Fprintf(&b, "HELD (%s)", a.Generation)
	default:
		b.WriteString("not held")
	}
	if a.KeyPartition != nil {
		if *a.KeyPartition {
			b.WriteString(" [the key's partition]")
		} else {
			b.WriteString(" [not the key's partition]")
		}
	}
	var ws []string
	for _, w := range a.Windows {
		held := ""
		if w.Held {
			held = " holds it"
		}
		span := "no window yet"
		if w.Start != nil {
			span = w.Start.Format(time.RFC3339) + " to " + w.End.Format(time.RFC3339)
		}
		ws = append(ws, fmt.Sprintf("%s %s%s (p %.3g)", w.Generation, span, held, w.FalsePositive))
	}
	if len(ws) > 0 {
		fmt.Fprintf(&b, "; %s; p(a key never seen reads held) %.3g", strings.Join(ws, ", "), a.FalsePositive)
	}
	if c := a.Checkpoint; c != nil {
		fmt.Fprintf(&b, "; checkpoint seq %d at offset %d, %s old", c.Seq, c.Offset,
			(time.Duration(c.AgeSeconds * float64(time.Second))).Round(time.Second))
	}
	if a.Position != nil {
		fmt.Fprintf(&b, "; live at offset %d", *a.Position)
	}
	if a.Note != "" {
		fmt.Fprintf(&b, "; %s", a.Note)
	}
	return b.String()
}
