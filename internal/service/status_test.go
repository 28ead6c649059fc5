package service

import (
	"maps"
	"testing"

	"dedup/internal/buildinfo"
	"dedup/internal/config"
	"dedup/internal/testkit"
)

// TestBuildInfoMetric: dedup_build_info is one series, 1, labelled with
// what `dedup version` reports and the configured filter mode.
func TestBuildInfoMetric(t *testing.T) {
	b := buildinfo.Read("")
	for _, mode := range []string{"counting", "plain"} {
		t.Run(mode, func(t *testing.T) {
			cfg, err := config.Load(testkit.Env{"DEDUP_MODE": mode}.Lookup)
			if err != nil {
				t.Fatal(err)
			}
			mfs, err := newRegistry(&cfg, b).Gather()
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"version": b.Version, "commit": b.Commit, "goversion": b.GoVersion, "mode": mode}
			found := false
			for _, mf := range mfs {
				if mf.GetName() != "dedup_build_info" {
					continue
				}
				found = true
				if n := len(mf.GetMetric()); n != 1 {
					t.Fatalf("dedup_build_info has %d series, want 1", n)
				}
				m := mf.GetMetric()[0]
				got := map[string]string{}
				for _, l := range m.GetLabel() {
					got[l.GetName()] = l.GetValue()
				}
				if !maps.Equal(got, want) {
					t.Errorf("dedup_build_info labels %v, want %v", got, want)
				}
				if v := m.GetGauge().GetValue(); v != 1 {
					t.Errorf("dedup_build_info = %v, want 1", v)
				}
			}
			if !found {
				t.Fatal("no dedup_build_info in the binary's registry")
			}
		})
	}
}
