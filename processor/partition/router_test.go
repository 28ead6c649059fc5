package partition

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/checkpoint"
)

// TestPartitionerMatchesJava: the hash partitioner agrees with franz-go's
// Kafka-compatible one (murmur2, as the Java client's default partitioner).
func TestPartitionerMatchesJava(t *testing.T) {
	ref := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for _, n := range []int{1, 2, 3, 7, 12, 100} {
		pt := NewRouter(n+1, n)
		for i := range 2000 {
			key := []byte(fmt.Sprintf("key-%d-%x", i, i*7919))
			if got, want := pt.partition(0, key), ref.Partition(&kgo.Record{Key: key}, n); got != want {
				t.Fatalf("%d partitions, key %q: got %d, want %d", n, key, got, want)
			}
		}
		if got := pt.partition(n+5, nil); got != (n+5)%n {
			t.Errorf("nil key from input partition %d over %d partitions: %d", n+5, n, got)
		}
	}
	same := NewRouter(4, 4)
	if got := same.partition(3, []byte("x")); got != 3 {
		t.Errorf("same partition count: got %d, want the input partition 3", got)
	}
}

// TestReachedSince: a restore scans only the input partition's own output
// partition while the counts are those the snapshot recorded; once either
// topic has grown (the routing may have changed in between), or when the
// snapshot predates the counts, every output partition.
func TestReachedSince(t *testing.T) {
	same, hashed := NewRouter(4, 4), NewRouter(4, 3)
	for _, c := range []struct {
		name string
		pt   Router
		m    checkpoint.Meta
		want []int
	}{
		{"same counts, partitions kept", same, checkpoint.Meta{InputPartitions: 4, OutputPartitions: 4}, []int{2}},
		{"same counts, hashed", hashed, checkpoint.Meta{InputPartitions: 4, OutputPartitions: 3}, []int{0, 1, 2}},
		{"input grew", same, checkpoint.Meta{InputPartitions: 3, OutputPartitions: 4}, nil},
		{"output grew", same, checkpoint.Meta{InputPartitions: 4, OutputPartitions: 3}, nil},
		{"counts not recorded", same, checkpoint.Meta{}, nil},
	} {
		if got := c.pt.ReachedSince(2, c.m); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if got := hashed.AllOutputs(); !slices.Equal(got, []int{0, 1, 2}) || hashed.InputPartitions() != 4 {
		t.Errorf("AllOutputs %v, InputPartitions %d", got, hashed.InputPartitions())
	}
}
