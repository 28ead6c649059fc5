package bench

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"time"

	"dedup/processor/cluster"
)

// cpuSampleEvery is how often a contender samples its own CPU time: the
// resolution of the CPU it reports for its timed window.
const cpuSampleEvery = 20 * time.Millisecond

// cpuSampler records this process's CPU time (user and system) over wall
// time, so that the CPU a contender spent inside its timed window (first
// record read to last output acknowledged, known only afterwards) can be
// read off: the process also starts, joins and stops outside it.
type cpuSampler struct {
	mu      sync.Mutex
	samples []cpuSample
}

type cpuSample struct {
	at  time.Time
	cpu time.Duration
}

// sampleCPU samples until ctx ends.
func sampleCPU(ctx context.Context) *cpuSampler {
	s := &cpuSampler{}
	s.sample()
	go cluster.Every(ctx, cpuSampleEvery, func() bool { s.sample(); return true })
	return s
}

func (s *cpuSampler) sample() {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return // no sample: between interpolates over the ones there are
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	s.mu.Lock()
	s.samples = append(s.samples, cpuSample{at: time.Now(), cpu: cpu})
	s.mu.Unlock()
}

// between is the CPU time spent from t0 to t1, interpolated linearly
// between the samples around each end.
func (s *cpuSampler) between(t0, t1 time.Time) time.Duration {
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(0, s.at(t1)-s.at(t0))
}

// at is the process's CPU time at t. Called with s.mu held.
func (s *cpuSampler) at(t time.Time) time.Duration {
	ss := s.samples
	i, _ := slices.BinarySearchFunc(ss, t, func(c cpuSample, t time.Time) int { return c.at.Compare(t) })
	switch {
	case len(ss) == 0:
		return 0
	case i == 0:
		return ss[0].cpu
	case i == len(ss):
		return ss[len(ss)-1].cpu
	}
	a, b := ss[i-1], ss[i]
	span := b.at.Sub(a.at)
	if span <= 0 {
		return b.cpu
	}
	return a.cpu + time.Duration(float64(b.cpu-a.cpu)*float64(t.Sub(a.at))/float64(span))
}
