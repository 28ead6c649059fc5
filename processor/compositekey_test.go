package processor

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/key"
	"dedup/rotation"
)

// TestCompositeKeysEveryMode: a composite DEDUP_KEY (header:tenant,json:id)
// decides records by all its parts in every filter mode: the same id under
// two tenants is two keys, "a","bc" and "ab","c" are two keys, a repeat is
// dropped, a retraction removes the composite key (counting and
// fingerprint) and a record missing a part is forwarded unkeyed.
func TestCompositeKeysEveryMode(t *testing.T) {
	for _, mode := range []rotation.Mode{rotation.Fingerprint, rotation.Counting, rotation.Plain} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newTestEnv(t, 1, 1)
			out := e.collect()
			o := e.options("composite-" + mode.String())
			o.Filter.Mode = mode
			ks, err := key.Parse("header:tenant,json:id")
			if err != nil {
				t.Fatal(err)
			}
			o.Key = ks
			base := time.Now().Add(-time.Minute)
			n := 0
			r := func(tenant, value string, extra ...kgo.RecordHeader) *kgo.Record {
				n++
				var hs []kgo.RecordHeader
				if tenant != "" {
					hs = append(hs, kgo.RecordHeader{Key: "tenant", Value: []byte(tenant)})
				}
				return rec(0, "", value, base.Add(time.Duration(n)*time.Millisecond), append(hs, extra...)...)
			}
			retraction := kgo.RecordHeader{Key: retract, Value: []byte("1")}
			e.produce(
				r("t1", `{"id":1,"n":"first"}`),
				r("t2", `{"id":1,"n":"other tenant"}`),
				r("t1", `{"id":1,"n":"repeat"}`),
				r("a", `{"id":"bc","n":"a,bc"}`),
				r("ab", `{"id":"c","n":"ab,c"}`),
				r("", `{"id":1,"n":"no tenant"}`),
				r("", `{"id":1,"n":"no tenant again"}`),
				r("t1", `{"id":1,"n":"retraction"}`, retraction),
				r("t1", `{"id":1,"n":"after retraction"}`),
				r("t9", sentinelValue(0)), // malformed JSON: unkeyed, forwarded
			)
			run := start(t, o)
			got := values(out.untilValue(sentinelValue(0)))
			want := []string{
				`{"id":1,"n":"first"}`, `{"id":1,"n":"other tenant"}`,
				`{"id":"bc","n":"a,bc"}`, `{"id":"c","n":"ab,c"}`,
				`{"id":1,"n":"no tenant"}`, `{"id":1,"n":"no tenant again"}`,
				`{"id":1,"n":"retraction"}`,
			}
			if mode != rotation.Plain { // plain filters cannot remove a key
				want = append(want, `{"id":1,"n":"after retraction"}`)
			}
			want = append(want, sentinelValue(0))
			if !slices.Equal(got, want) {
				t.Errorf("output\n got %q\nwant %q", got, want)
			}
			if err := run.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}
