package repartition

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKeyPartitionIsJavaMurmur2: KeyPartition places keys as the Java
// client's default partitioner does (franz-go's Kafka-compatible one), so
// that a key's partition can be named from outside the stage too.
func TestKeyPartitionIsJavaMurmur2(t *testing.T) {
	java := kgo.StickyKeyPartitioner(nil).ForTopic("repartition")
	for _, parts := range []int{1, 3, 7, 64} {
		seen := map[int]bool{}
		for i := range 2000 {
			k := fmt.Appendf(nil, "key-%d", i)
			got := KeyPartition(k, parts)
			if want := java.Partition(&kgo.Record{Key: k}, parts); got != want {
				t.Fatalf("%d partitions, key %q: %d, the Java partitioner %d", parts, k, got, want)
			}
			seen[got] = true
		}
		if len(seen) != parts {
			t.Errorf("%d partitions: keys reached %d of them", parts, len(seen))
		}
	}
}
