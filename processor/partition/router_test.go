package partition

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
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
