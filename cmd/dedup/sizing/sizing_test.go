package sizing

import "testing"

func TestResources(t *testing.T) {
	const mib = 1 << 20
	d := Deployment{PairBytes: 20 * mib, Partitions: 6, Replicas: 3, FetchMaxBytes: 10 * mib, ProduceBatchBytes: 1 * mib}
	r := d.Resources()
	if r.PartitionsPerInstance != 2 || r.PartitionsPerInstanceOneDown != 3 {
		t.Fatalf("partitions per instance %d, with one down %d; want 2 and 3", r.PartitionsPerInstance, r.PartitionsPerInstanceOneDown)
	}
	// 2 partitions + 1 spare pair, 2 fetches, 6 output batches, the runtime.
	if want := int64(3*20+2*10+6*1)*mib + RuntimeBase; r.Request != want {
		t.Errorf("request %d, want %d", r.Request, want)
	}
	if want := (int64(4*20+3*10+6*1)*mib + RuntimeBase) * 5 / 4; r.Limit != want {
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
