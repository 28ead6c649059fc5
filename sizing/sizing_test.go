package sizing

import "testing"

func TestResources(t *testing.T) {
	const mib = 1 << 20
	d := Deployment{PairBytes: 20 * mib, Partitions: 6, Replicas: 3, FetchBufferBytes: 64 * mib, ProduceBatchBytes: 1 * mib}
	r := d.Resources()
	if r.PartitionsPerInstance != 2 || r.PartitionsPerInstanceOneDown != 3 {
		t.Fatalf("partitions per instance %d, with one down %d; want 2 and 3", r.PartitionsPerInstance, r.PartitionsPerInstanceOneDown)
	}
	// 2 partitions + 1 spare pair, their fetch buffer (each at most
	// MaxPartitionShare), 2 partitions' overhead, 6 output batches, the
	// runtime.
	if want := int64(3*20+6*1)*mib + 2*MaxPartitionShare + 2*PartitionOverhead + RuntimeBase; r.Request != want {
		t.Errorf("request %d, want %d", r.Request, want)
	}
	if want := (int64(4*20+6*1)*mib + 3*MaxPartitionShare + 3*PartitionOverhead + RuntimeBase) * 5 / 4; r.Limit != want {
		t.Errorf("limit %d, want %d", r.Limit, want)
	}
	if r.GoMemLimit >= r.Limit || r.GoMemLimit < r.Limit*85/100 {
		t.Errorf("GOMEMLIMIT %d for a limit of %d: want about 90%%", r.GoMemLimit, r.Limit)
	}
	one := Deployment{PairBytes: mib, Partitions: 4, Replicas: 1}.Resources()
	if one.PartitionsPerInstance != 4 || one.PartitionsPerInstanceOneDown != 4 {
		t.Errorf("one replica: %+v", one)
	}
}

func TestFetchBuffer(t *testing.T) {
	const mib = 1 << 20
	// The budget is shared, whatever the partition count, until each
	// partition is down to its minimum share.
	for _, c := range []struct {
		budget     int64
		partitions int
		share      int64
		total      int64
	}{
		{64 * mib, 1, MaxPartitionShare, MaxPartitionShare},
		{64 * mib, 8, 8 * mib, 64 * mib},
		{64 * mib, 16, 4 * mib, 64 * mib},
		{64 * mib, 48, 64 * mib / 48, 64 * mib / 48 * 48},
		{64 * mib, 128, MinPartitionShare, 128 * MinPartitionShare},
		{0, 4, DefaultFetchBufferBytes / 4, DefaultFetchBufferBytes},
		{0, 2, MaxPartitionShare, 2 * MaxPartitionShare},
	} {
		if got := PartitionShare(c.budget, c.partitions); got != c.share {
			t.Errorf("PartitionShare(%d, %d) = %d, want %d", c.budget, c.partitions, got, c.share)
		}
		if got := FetchBuffer(c.budget, c.partitions); got != c.total {
			t.Errorf("FetchBuffer(%d, %d) = %d, want %d", c.budget, c.partitions, got, c.total)
		}
	}
	if got := FetchBuffer(64*mib, 0); got != 0 {
		t.Errorf("FetchBuffer with no partitions = %d, want 0", got)
	}
}

func TestQuantities(t *testing.T) {
	const mib = 1 << 20
	if got := Quantity(100*mib + 1); got != "101Mi" {
		t.Errorf("Quantity rounds up: %s", got)
	}
	if got := Quantity(100 * mib); got != "100Mi" {
		t.Errorf("Quantity(100 MiB) = %s", got)
	}
	if got := GoMemLimit(100*mib + mib - 1); got != "100MiB" {
		t.Errorf("GoMemLimit rounds down: %s", got)
	}
}
