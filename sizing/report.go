package sizing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"
	"time"

	"dedup/checkpoint"
	"dedup/rotation"
)

// SampleKeys bounds the keys inserted to estimate the false-positive rate
// and the compressed snapshot size: a larger partition is estimated on a
// pair sized for SampleKeys keys at the same rate, which has the same
// geometry per key (counters or bits per key, k) and so the same rate and
// compression, and takes a second rather than a minute.
const SampleKeys = 1_000_000

// MeasureProbes is how many absent keys Workload.Measure tests.
const MeasureProbes = 1_000_000

// Workload is what `dedup size` is asked.
type Workload struct {
	KeysPerWindow      uint64 // distinct keys per window, all partitions
	Window             time.Duration
	FPRate             float64
	Partitions         int
	Instances          int
	Modes              []rotation.Mode // one report block each, in this order
	CheckpointInterval time.Duration
	// ChainRatio is CHECKPOINT_CHAIN_RATIO (0: checkpoint.DefaultChainRatio;
	// negative: every checkpoint a full snapshot).
	ChainRatio        float64
	FetchBufferBytes  int64
	ProduceBatchBytes int64
	Measure           bool // probe the sample pair with absent keys
	// Repartition, when set, adds the repartition topic's throughput and
	// storage to the report (REPARTITION_TOPIC).
	Repartition *Repartition
	// Hops is the REPARTITION_HOPS role the instances are sized for
	// (HopsBoth, HopsRekey, HopsDedup; "" both): HopsRekey sizes hop 1
	// alone, no filters, over Partitions input partitions; HopsDedup the
	// filters and hop 2 alone, over Partitions of the repartition topic.
	// Either needs Repartition.
	Hops string
}

// rekeyOnly reports whether w sizes REPARTITION_HOPS=rekey instances: no
// filters at all.
func (w Workload) rekeyOnly() bool { return w.Hops == HopsRekey }

// KeysPerPartition is n: the distinct keys one partition sees in a window.
func (w Workload) KeysPerPartition() uint64 {
	return (w.KeysPerWindow + uint64(w.Partitions) - 1) / uint64(w.Partitions)
}

// Options are the rotation options of one partition's pair in mode m.
func (w Workload) Options(m rotation.Mode) rotation.Options {
	return rotation.Options{ExpectedKeys: max(w.KeysPerPartition(), 1), FPRate: w.FPRate, Window: w.Window, Mode: m}
}

// Validate reports what rotation would refuse about w's pairs, every
// problem at once, without allocating them.
func (w Workload) Validate() error {
	var problems []error
	if w.Hops != "" && w.Hops != HopsBoth && w.Repartition == nil {
		problems = append(problems, fmt.Errorf("role %s: the hops exist only with a repartition topic", w.Hops))
	}
	if w.rekeyOnly() {
		return errors.Join(problems...) // no filters to size
	}
	if n := w.KeysPerPartition(); n > rotation.MaxExpectedKeys {
		problems = append(problems, fmt.Errorf("%d keys per partition: want at most %d (DEDUP_EXPECTED_KEYS); add partitions", n, uint64(rotation.MaxExpectedKeys)))
	}
	for _, m := range w.Modes {
		o := w.Options(m)
		o.ExpectedKeys = 1 // validate the rest without allocating
		if _, err := rotation.New(o); err != nil {
			problems = append(problems, err)
		}
	}
	return errors.Join(problems...)
}

// newKeysPerDay is the distinct keys one partition sees a day at the
// workload's rate.
func (w Workload) newKeysPerDay() float64 {
	return float64(w.KeysPerWindow) / float64(w.Partitions) * float64(24*time.Hour) / float64(w.Window)
}

// Deployment is the memory model of w for one pair size.
func (w Workload) Deployment(pairBytes int64) Deployment {
	d := Deployment{PairBytes: pairBytes, Partitions: w.Partitions, Replicas: w.Instances,
		FetchBufferBytes: w.FetchBufferBytes, ProduceBatchBytes: w.ProduceBatchBytes, Hops: w.Hops}
	if w.Repartition != nil {
		d.Hop1PartitionBytes = w.Repartition.Hop1PartitionBytes()
	}
	return d
}

// Filter is one mode's figures, every one from rotation or the checkpoint
// store.
type Filter struct {
	Mode           rotation.Mode
	M              uint64 // per generation: counters, bits or slots
	K              uint32 // hash functions, or fingerprint bits
	PartitionBytes int64  // both generations
	Sampled        uint64 // keys the sample pair is sized for
	// False-positive rates from rotation's model (rotation.PairRate,
	// rotation.FalseDropsPerDay), the one model behind the sizing: one
	// generation holding n keys, a record's rate averaged over a
	// steady-state window (previous generation full, current filling), and
	// both generations full.
	OneGenFP, MeanFP, EndFP float64
	DropsPerDay             float64 // new records dropped a day, all partitions
	// The sample pair with both generations full, probed with keys never
	// added, next to the model's rate for that pair.
	MeasuredFP, SampleFP float64
	Measured             bool
	// Compressed snapshot size over raw, at the start of a window (previous
	// generation full, current empty), and at its end (both full).
	RatioStart, RatioEnd float64
	// IncrementBytes is what one checkpoint interval's increment stores for
	// one partition, measured on the sample pair in mid-window (previous
	// generation full, current half full) with the partition's new keys of
	// an interval; zero for a mode without increments (plain). BaseBytes
	// is the stored size of that mid-window base, scaled from the sample
	// to the partition's pair.
	IncrementBytes, BaseBytes float64
	// IncrementFixed is the stored size of an empty increment: what every
	// increment costs whatever it carries, and all a move's claim costs.
	IncrementFixed float64
}

// chainRatio is w's chain ratio, its default applied; 0: no increments.
func (w Workload) chainRatio(m rotation.Mode) float64 {
	switch {
	case !m.Incremental() || w.ChainRatio < 0:
		return 0
	case w.ChainRatio == 0:
		return checkpoint.DefaultChainRatio
	}
	return w.ChainRatio
}

// keysPerInterval is the new keys one partition sees in a checkpoint
// interval.
func (w Workload) keysPerInterval() float64 {
	return float64(w.KeysPerWindow) / float64(w.Partitions) * w.CheckpointInterval.Seconds() / w.Window.Seconds()
}

// IncrementalBandwidth is the stored bytes a second the checkpoints of
// every partition write with chains: each interval's increment, and a new
// base each time the increments reach ChainRatio times it, so a base's
// share is 1/ChainRatio of the increments. Zero when the mode has none.
func (f Filter) IncrementalBandwidth(w Workload) float64 {
	ratio := w.chainRatio(f.Mode)
	if ratio == 0 || f.IncrementBytes == 0 {
		return 0
	}
	return f.IncrementBytes * (1 + 1/ratio) * float64(w.Partitions) / w.CheckpointInterval.Seconds()
}

// RollingDeploy is what the checkpoints of a rolling deploy write, each of
// w.Instances replaced in turn, with chains: every replacement is two
// rebalances (the member leaves, its replacement joins), at each of which
// every partition stops with a final increment (half an interval of
// changes, on average); and each of the instance's partitions moves twice
// (away, and back to the replacement under sticky assignment), each move
// adding the new owner's claim, an empty increment. perMove is a moved
// partition's final increment and claim; bases is what the moves would
// write if each wrote a base instead. Zero without increments.
func (f Filter) RollingDeploy(w Workload) (total, perMove, bases float64, moves int) {
	if w.chainRatio(f.Mode) == 0 || f.IncrementBytes == 0 {
		return 0, 0, 0, 0
	}
	stop := f.IncrementFixed + (f.IncrementBytes-f.IncrementFixed)/2
	moves = 2 * w.Partitions
	rebalances := 2 * max(w.Instances, 1)
	total = float64(rebalances*w.Partitions)*stop + float64(moves)*f.IncrementFixed
	return total, stop + f.IncrementFixed, float64(moves) * f.BaseBytes, moves
}

// RestoreBytes is the most a restore of one partition reads: its base and
// ChainRatio times it in increments (the base alone without increments).
func (f Filter) RestoreBytes(w Workload) float64 {
	return f.BaseBytes * (1 + w.chainRatio(f.Mode))
}

// CheckpointBandwidth is the raw bytes a second the checkpoints of every
// partition write; times RatioStart or RatioEnd, compressed.
func (f Filter) CheckpointBandwidth(w Workload) float64 {
	return float64(f.PartitionBytes) * float64(w.Partitions) / w.CheckpointInterval.Seconds()
}

// sampleKey is the id-th synthetic key: distinct ids give distinct keys.
func sampleKey(buf *[16]byte, id uint64) []byte {
	copy(buf[:8], "dedupkey")
	for i := range 8 {
		buf[8+i] = byte(id >> (8 * i))
	}
	return buf[:]
}

// Size computes one mode's figures: the pair's geometry and memory, the
// model's rates, and the sample pair's compression (and measured rate).
func Size(w Workload, mode rotation.Mode) (Filter, error) {
	o := w.Options(mode)
	p, err := rotation.New(o)
	if err != nil {
		return Filter{}, err
	}
	st := p.Stats()
	r := Filter{Mode: mode, M: st.Current.M, K: st.Current.K, PartitionBytes: int64(p.SizeBytes())}
	p = nil // the sample below stands for it; let the memory go

	if r.EndFP, err = rotation.PairRate(o, float64(o.ExpectedKeys)); err != nil {
		return Filter{}, err
	}
	r.OneGenFP = -math.Expm1(0.5 * math.Log1p(-r.EndFP)) // 1-(1-g)² = EndFP
	perPartition, err := rotation.FalseDropsPerDay(o, w.newKeysPerDay())
	if err != nil {
		return Filter{}, err
	}
	r.DropsPerDay = perPartition * float64(w.Partitions)
	if keys := w.newKeysPerDay(); keys > 0 {
		r.MeanFP = perPartition / keys
	}

	so := o
	so.ExpectedKeys = min(o.ExpectedKeys, SampleKeys)
	r.Sampled = so.ExpectedKeys
	sp, err := rotation.New(so)
	if err != nil {
		return Filter{}, err
	}
	if r.SampleFP, err = rotation.PairRate(so, float64(so.ExpectedKeys)); err != nil {
		return Filter{}, err
	}
	dir, err := os.MkdirTemp("", "dedup-size-")
	if err != nil {
		return Filter{}, err
	}
	defer os.RemoveAll(dir)
	store, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: dir, Keep: 1, Group: "size"})
	if err != nil {
		return Filter{}, err
	}
	ratio := func() (float64, error) {
		m, err := store.Save(context.Background(), checkpoint.Meta{Group: "size", Topic: "t", OutputTopic: "o"}, sp)
		if err != nil {
			return 0, fmt.Errorf("compress a sample snapshot: %w", err)
		}
		return float64(m.StoredBytes) / float64(m.RawBytes), nil
	}

	var buf [16]byte
	n := so.ExpectedKeys
	// The previous window: fill a generation with n keys, then rotate.
	t0 := time.Unix(0, 0).Add(100 * o.Window)
	for id := range n {
		sp.TestAndAdd(sampleKey(&buf, id), t0)
	}
	t1 := t0.Add(o.Window)
	sp.TestAndAdd(sampleKey(&buf, n), t1) // rotates; one key of the new window
	if r.RatioStart, err = ratio(); err != nil {
		return Filter{}, err
	}
	half := n + n/2
	for id := n + 1; id < half; id++ {
		sp.TestAndAdd(sampleKey(&buf, id), t1)
	}
	var added uint64
	if r.IncrementBytes, r.BaseBytes, r.IncrementFixed, added, err = incrementBytes(w, mode, sp, store, half, float64(o.ExpectedKeys)/float64(n)); err != nil {
		return Filter{}, err
	}
	for id := half + added; id < 2*n; id++ {
		sp.TestAndAdd(sampleKey(&buf, id), t1)
	}
	if r.RatioEnd, err = ratio(); err != nil {
		return Filter{}, err
	}
	if w.Measure {
		var fp uint64
		for id := range uint64(MeasureProbes) {
			if sp.Test(sampleKey(&buf, 2*n+id)) {
				fp++
			}
		}
		r.MeasuredFP = float64(fp) / MeasureProbes
		r.Measured = true
	}
	return r, nil
}

// incrementBytes measures one interval's increment on the sample pair sp
// in mid-window, its keys from id first on: a base saved as is, an empty
// increment (what every increment costs: header, small state, the store's
// framing), then the interval's new keys as the next. The sample holds a
// fraction of the partition's keys (1/scale), so it gets that fraction of
// an interval's new keys: they touch the same share of its words, at the
// same gaps, as the whole interval does in the partition's pair. The
// increment is that beyond the empty one times scale, plus the empty one;
// the base is scaled by scale; fixed is the empty one.
func incrementBytes(w Workload, mode rotation.Mode, sp *rotation.Pair, store *checkpoint.FileStore, first uint64, scale float64) (inc, base, fixed float64, added uint64, err error) {
	ctx := context.Background()
	meta := checkpoint.Meta{Group: "size", Topic: "t", OutputTopic: "o"}
	sp.ResetDelta()
	b, err := store.Save(ctx, meta, sp)
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("save a sample base: %w", err)
	}
	base = float64(b.StoredBytes) * scale
	if !mode.Incremental() {
		return 0, base, 0, 0, nil
	}
	var d rotation.Delta
	save := func(prev uint64) (checkpoint.Meta, error) {
		sp.TakeDelta(&d)
		m := meta
		m.Base, m.Prev = b.Seq, prev
		saved, err := store.Save(ctx, m, &d)
		if err != nil {
			return checkpoint.Meta{}, fmt.Errorf("save a sample increment: %w", err)
		}
		return saved, nil
	}
	empty, err := save(b.Seq)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	want := w.keysPerInterval() / scale
	keys := max(uint64(min(math.Round(want), float64(sp.Options().ExpectedKeys/4))), 1)
	var buf [16]byte
	t := sp.Stats().WindowStart
	for id := first; id < first+keys; id++ {
		sp.TestAndAdd(sampleKey(&buf, id), t)
	}
	m, err := save(empty.Seq)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	fixed = float64(empty.StoredBytes)
	perKey := max(float64(m.StoredBytes)-fixed, 0) / float64(keys)
	return fixed + perKey*w.keysPerInterval(), base, fixed, keys, nil
}

// Report is a workload with the figures of each of its modes.
type Report struct {
	Workload Workload
	Filters  []Filter // one per Workload.Modes, in order
}

// NewReport sizes every mode of w.
func NewReport(w Workload) (Report, error) {
	r := Report{Workload: w}
	if w.rekeyOnly() {
		if w.Repartition == nil {
			return Report{}, errors.New("size workload: role rekey without a repartition topic")
		}
		return r, nil // hop 1 alone holds no filters
	}
	for _, mode := range w.Modes {
		f, err := Size(w, mode)
		if err != nil {
			return Report{}, err
		}
		r.Filters = append(r.Filters, f)
	}
	if len(r.Filters) == 0 {
		return Report{}, errors.New("size workload: no filter mode")
	}
	return r, nil
}

// Write prints the report as `dedup size` shows it: what to deploy per
// mode, then the filters' figures side by side.
func (r Report) Write(w io.Writer) error {
	in, rows := r.Workload, r.Filters
	if in.rekeyOnly() {
		return r.writeRekey(w)
	}
	role, every := "", "every instance"
	if in.Hops == HopsDedup {
		role, every = "  REPARTITION_HOPS=dedup\n", "every REPARTITION_HOPS=dedup instance"
	}
	n := in.KeysPerPartition()
	res := in.Deployment(rows[0].PartitionBytes).Resources()
	fmt.Fprintf(w, "workload: %d distinct keys per %v window over %d partitions: n = %d keys per partition per window\n",
		in.KeysPerWindow, in.Window, in.Partitions, n)
	fmt.Fprintf(w, "target false-positive rate ε = %g; %d instance(s): %d partition(s) each, %d while one is down\n",
		in.FPRate, in.Instances, res.PartitionsPerInstance, res.PartitionsPerInstanceOneDown)

	for _, r := range rows {
		res := in.Deployment(r.PartitionBytes).Resources()
		fmt.Fprintf(w, "\nDeploy, mode %s (%s):\n%s", r.Mode, every, role)
		fmt.Fprintf(w, "  DEDUP_MODE=%s\n  DEDUP_EXPECTED_KEYS=%d\n  DEDUP_FP_RATE=%g\n  DEDUP_WINDOW=%v\n",
			r.Mode, n, in.FPRate, in.Window)
		fmt.Fprintf(w, "  GOMEMLIMIT=%s\n", GoMemLimit(res.GoMemLimit))
		fmt.Fprintf(w, "  resources: requests memory %s, limits memory %s (replicas: %d)\n",
			Quantity(res.Request), Quantity(res.Limit), in.Instances)
		raw := r.CheckpointBandwidth(in)
		if inc := r.IncrementalBandwidth(in); inc > 0 {
			fmt.Fprintf(w, "  checkpoint bandwidth, all partitions every %v: %s/s in increments and their bases (CHECKPOINT_CHAIN_RATIO=%g; %.3g bytes per new key)\n",
				in.CheckpointInterval, BytesIEC(inc), in.chainRatio(r.Mode), inc*in.CheckpointInterval.Seconds()/float64(in.Partitions)/max(in.keysPerInterval(), 1))
			fmt.Fprintf(w, "    (full snapshots every %v instead: raw %s/s; compressed %s/s at a window's start to %s/s at its end)\n",
				in.CheckpointInterval, BytesIEC(raw), BytesIEC(raw*r.RatioStart), BytesIEC(raw*r.RatioEnd))
		} else {
			fmt.Fprintf(w, "  checkpoint bandwidth, all partitions every %v, full snapshots (%s mode has no increments): raw %s/s; compressed %s/s at a window's start to %s/s at its end\n",
				in.CheckpointInterval, r.Mode, BytesIEC(raw), BytesIEC(raw*r.RatioStart), BytesIEC(raw*r.RatioEnd))
		}
		if total, perMove, bases, moves := r.RollingDeploy(in); total > 0 {
			fmt.Fprintf(w, "  a rolling deploy of %d instance(s) writes about %s of checkpoints: %s per moved partition (%d moves: its final increment and the new owner's claim), a final increment of every partition at each rebalance; %s if every move wrote a base\n",
				in.Instances, BytesIEC(total), BytesIEC(perMove), moves, BytesIEC(bases))
		}
		what := "its base and the increments on it"
		if in.chainRatio(r.Mode) == 0 {
			what = "its newest snapshot"
		}
		fmt.Fprintf(w, "  restore reads at most %s per partition (%s)\n", BytesIEC(r.RestoreBytes(in)), what)
		fmt.Fprintf(w, "  expected false drops: %.3g new records a day, all partitions (%.3g%% of first occurrences, mean over a window)\n",
			r.DropsPerDay, 100*r.MeanFP)
	}

	fmt.Fprintln(w, "\nFilters:")
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	line := func(label string, cell func(r Filter) string) {
		fmt.Fprint(tw, "  "+label)
		for _, r := range rows {
			fmt.Fprintf(tw, "\t%s", cell(r))
		}
		fmt.Fprintln(tw, "\t")
	}
	bits := math.Log2(1 / in.FPRate)
	bound := float64(n) * bits / 8
	line("", func(r Filter) string { return r.Mode.String() })
	line("m per generation (counters, bits or slots)", func(r Filter) string { return fmt.Sprint(r.M) })
	line("k (hash functions, or fingerprint bits)", func(r Filter) string { return fmt.Sprint(r.K) })
	line("memory per partition (2 generations)", func(r Filter) string { return BytesIEC(float64(r.PartitionBytes)) })
	line(fmt.Sprintf("filters per instance (%d partitions + 1 checkpoint spare)", res.PartitionsPerInstance), func(r Filter) string {
		return BytesIEC(float64(r.PartitionBytes) * float64(res.PartitionsPerInstance+1))
	})
	line(fmt.Sprintf("memory, all %d partitions", in.Partitions), func(r Filter) string {
		return BytesIEC(float64(r.PartitionBytes) * float64(in.Partitions))
	})
	line("bits per key (one generation)", func(r Filter) string {
		return fmt.Sprintf("%.2f", float64(r.PartitionBytes)*8/2/float64(n))
	})
	line("bound n·log2(1/ε), one generation", func(Filter) string {
		return fmt.Sprintf("%s (%.2f bits/key)", BytesIEC(bound), bits)
	})
	line("memory / bound", func(r Filter) string {
		return fmt.Sprintf("%.2f×", float64(r.PartitionBytes)*8/2/float64(n)/bits)
	})
	line("FP rate, one generation holding n keys", func(r Filter) string { return fmt.Sprintf("%.3g%%", 100*r.OneGenFP) })
	line("FP rate, mean over a window (steady state)", func(r Filter) string { return fmt.Sprintf("%.3g%%", 100*r.MeanFP) })
	line("FP rate, end of a window (both generations full)", func(r Filter) string { return fmt.Sprintf("%.3g%%", 100*r.EndFP) })
	if in.Measure {
		line(fmt.Sprintf("  measured on the sample, %d absent keys (model)", MeasureProbes), func(r Filter) string {
			return fmt.Sprintf("%.3g%% (%.3g%%)", 100*r.MeasuredFP, 100*r.SampleFP)
		})
	}
	line("compressed snapshot / raw, window start .. end", func(r Filter) string {
		return fmt.Sprintf("%.3f .. %.3f", r.RatioStart, r.RatioEnd)
	})
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if n > SampleKeys {
		fmt.Fprintf(w, "The measured rate and the compression are read on a sample pair sized for %d keys at the same rate (same counters or bits per key, same k).\n", uint64(SampleKeys))
	}
	fmt.Fprintln(w, "A record is tested against both generations, sized so that with both full (n keys each) the pair's modelled rate is at most ε (each generation at about ε/2; fingerprint widths are even, so that mode lands at or below ε):")
	fmt.Fprintln(w, "in steady state the previous generation holds a full window while the current one fills, so a record meets about half the end-of-window rate at a window's start and all of it at its end; false drops are rotation's model over the window.")
	hop1 := ""
	if in.Repartition != nil && in.Hops != HopsDedup {
		hop1 = fmt.Sprintf(" + hop 1's reader (%s) per input partition", BytesIEC(float64(in.Repartition.Hop1PartitionBytes())))
	}
	fmt.Fprintf(w, "Memory: request = filters of %d partitions + 1 spare + their share of FETCH_BUFFER_BYTES (%d to %d MiB each) + %d KiB each%s + a PRODUCE_BATCH_BYTES batch per output partition + %d MiB runtime;\n",
		res.PartitionsPerInstance, MinPartitionShare>>20, MaxPartitionShare>>20, PartitionOverhead>>10, hop1, RuntimeBase>>20)
	fmt.Fprintf(w, "limit = the same with one instance down (%d partitions) ×5/4 for the collector; GOMEMLIMIT = 90%% of the limit.\n", res.PartitionsPerInstanceOneDown)
	fmt.Fprintln(w, "Under load the resident memory settles near GOMEMLIMIT (the collector holds it there); without GOMEMLIMIT it grows to about twice the live heap.")
	fmt.Fprintln(w, "The bound n·log2(1/ε) is the least memory any structure answering membership at rate ε can use for n keys.")
	writeKeyCosts(w)
	switch {
	case in.Repartition != nil && in.Hops == HopsDedup:
		in.Repartition.writeTopic(w)
		fmt.Fprintf(w, "  hop 1 holds %s per input partition in the REPARTITION_HOPS=rekey instances, not counted here: size them with --hops rekey\n\n",
			BytesIEC(float64(in.Repartition.Hop1PartitionBytes())))
	case in.Repartition != nil:
		in.Repartition.Write(w)
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "Changing DEDUP_MODE, DEDUP_EXPECTED_KEYS, DEDUP_FP_RATE or DEDUP_WINDOW: each partition keeps its old pair beside the new one until")
	fmt.Fprintln(w, "the old window has passed twice; until the log says the old filters were released, memory must also cover the old settings' filters.")
	return nil
}

// writeRekey is the report for REPARTITION_HOPS=rekey instances: hop 1
// alone, its reader per input partition and the runtime, no filters.
func (r Report) writeRekey(w io.Writer) error {
	in := r.Workload
	res := in.Deployment(0).Resources()
	hop1 := in.Repartition.Hop1PartitionBytes()
	fmt.Fprintf(w, "workload: %.0f input records/s over %d input partitions, hop 1 alone (REPARTITION_HOPS=rekey: no filters, checkpoints or output writer)\n",
		in.Repartition.RecordsPerSecond, in.Partitions)
	fmt.Fprintf(w, "%d instance(s): %d input partition(s) each, %d while one is down\n",
		in.Instances, res.PartitionsPerInstance, res.PartitionsPerInstanceOneDown)
	fmt.Fprintf(w, "\nDeploy, hop 1 (every REPARTITION_HOPS=rekey instance):\n  REPARTITION_HOPS=rekey\n")
	fmt.Fprintf(w, "  GOMEMLIMIT=%s\n", GoMemLimit(res.GoMemLimit))
	fmt.Fprintf(w, "  resources: requests memory %s, limits memory %s (replicas: %d)\n",
		Quantity(res.Request), Quantity(res.Limit), in.Instances)
	fmt.Fprintln(w, "  DEDUP_EXPECTED_KEYS, DEDUP_FP_RATE, DEDUP_MODE, FETCH_BUFFER_BYTES and the checkpoint settings are not used by this role")
	fmt.Fprintf(w, "\nMemory: request = hop 1's reader (%s) + %d KiB per input partition, %d partitions, + %d MiB runtime;\n",
		BytesIEC(float64(hop1)), PartitionOverhead>>10, res.PartitionsPerInstance, RuntimeBase>>20)
	fmt.Fprintf(w, "limit = the same with one instance down (%d partitions) ×5/4 for the collector; GOMEMLIMIT = 90%% of the limit.\n", res.PartitionsPerInstanceOneDown)
	writeKeyCosts(w)
	in.Repartition.Write(w)
	return nil
}

// BytesIEC formats a byte count with a binary-prefix unit.
func BytesIEC(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}
