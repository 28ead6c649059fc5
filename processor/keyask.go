package processor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"dedup/processor/partition"
)

// keyAskWait bounds how long AskKey waits for the workers: each answers at
// its next tick (every 100 ms at least while it runs), so a worker silent
// this long is stopping, restoring or stuck, and is reported as such.
const keyAskWait = 2 * time.Second

// keyQuestionQueue is how many questions may wait for one worker's tick.
const keyQuestionQueue = 8

// ErrNoAnswer is a partition whose worker did not answer AskKey in time.
var ErrNoAnswer = errors.New("no answer from the partition's worker")

// keyAsks routes questions about keys to the workers of the partitions
// this member runs (partition.Deps.Questions). A worker's filters are its
// goroutine's alone: the question travels to it, never the filters out.
type keyAsks struct {
	mu      sync.Mutex
	serving map[int]askedPartition
}

// askedPartition is a running partition's question channel and its
// generation's input partition count.
type askedPartition struct {
	questions chan<- partition.KeyQuestion
	inputs    int
}

// serve registers part's worker, served through questions, until the
// returned function is called.
func (k *keyAsks) serve(part, inputs int, questions chan<- partition.KeyQuestion) (stop func()) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.serving == nil {
		k.serving = map[int]askedPartition{}
	}
	k.serving[part] = askedPartition{questions: questions, inputs: inputs}
	return func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.serving[part].questions == questions {
			delete(k.serving, part)
		}
	}
}

// PartitionAnswer is one partition's answer to AskKey.
type PartitionAnswer struct {
	Partition int
	partition.KeyAnswer
	Err error // ErrNoAnswer (wrapped): the worker did not answer in time
}

// KeyAnswers are AskKey's answers.
type KeyAnswers struct {
	Topic string // the input topic (the repartition topic for hop 2)
	// Partitions is the input topic's partition count in the current
	// generation (0 when this member runs no partition).
	Partitions int
	Answers    []PartitionAnswer // by partition
}

// AskKey asks every partition this member runs what its live filters say
// of dedup key k, never adding it: each worker answers from its own
// goroutine at its next tick. A worker that does not answer within
// keyAskWait, or before ctx ends, is answered with ErrNoAnswer.
func (p *Processor) AskKey(ctx context.Context, k []byte) KeyAnswers {
	ctx, cancel := context.WithTimeout(ctx, keyAskWait)
	defer cancel()
	p.keyAsks.mu.Lock()
	parts := make(map[int]askedPartition, len(p.keyAsks.serving))
	for part, s := range p.keyAsks.serving {
		parts[part] = s
	}
	p.keyAsks.mu.Unlock()

	out := KeyAnswers{Topic: p.o.InputTopic}
	replies := make(map[int]chan partition.KeyAnswer, len(parts))
	for part, s := range parts {
		out.Partitions = max(out.Partitions, s.inputs)
		reply := make(chan partition.KeyAnswer, 1)
		select {
		case s.questions <- partition.KeyQuestion{Key: k, Answer: reply}:
			replies[part] = reply
		case <-ctx.Done():
		}
	}
	for _, part := range slices.Sorted(maps.Keys(parts)) {
		a := PartitionAnswer{Partition: part}
		select {
		case a.KeyAnswer = <-replies[part]: // a nil channel (never asked) blocks: ctx decides
		case <-ctx.Done():
			a.Err = fmt.Errorf("ask partition %d: %w within %s", part, ErrNoAnswer, keyAskWait)
		}
		out.Answers = append(out.Answers, a)
	}
	return out
}
