package chartcheck

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"

	"dedup/deploy/k8scheck"
)

const (
	chartDir = "../dedup"
	repoRoot = "../../.."
)

// render renders the chart as `helm template` would, with the values file
// (empty: the chart's defaults) and overrides on top.
func render(t *testing.T, valuesFile string, overrides map[string]any) []k8scheck.Object {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	vals := map[string]any{}
	if valuesFile != "" {
		v, err := chartutil.ReadValuesFile(valuesFile)
		if err != nil {
			t.Fatal(err)
		}
		vals = v.AsMap()
	}
	vals = chartutil.CoalesceTables(overrides, vals)
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "dedup", Namespace: "streaming", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	var objs []k8scheck.Object
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") || strings.TrimSpace(out[name]) == "" {
			continue
		}
		o, err := k8scheck.Decode(name, []byte(out[name]))
		if err != nil {
			t.Fatalf("%v\n%s", err, out[name])
		}
		objs = append(objs, o...)
	}
	return objs
}

func defaults(t *testing.T) k8scheck.Options {
	t.Helper()
	d, err := k8scheck.ConfigDefaults(filepath.Join(repoRoot, "internal", "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	return k8scheck.Options{ConfigDefaults: d}
}

func kinds(objs []k8scheck.Object) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[o.Kind]++
	}
	return n
}

// TestLint runs Helm's own chart linter (`helm lint`), on the defaults and
// with the hops deployed apart.
func TestLint(t *testing.T) {
	for _, vals := range []map[string]any{{}, splitValues} {
		res := lint.All(chartDir, vals, "streaming", false)
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint %v: %s", vals, m)
			}
		}
	}
}

// TestDefaultValues: the chart's defaults render the same hardened stage
// as deploy/kubernetes.
func TestDefaultValues(t *testing.T) {
	objs := render(t, "", nil)
	for _, err := range k8scheck.Check(objs, defaults(t)) {
		t.Error(err)
	}
	got := kinds(objs)
	for _, k := range []string{"Deployment", "ConfigMap", "Service", "ServiceAccount", "NetworkPolicy", "PodDisruptionBudget"} {
		if got[k] != 1 {
			t.Errorf("want one %s, rendered %d", k, got[k])
		}
	}
	for _, k := range []string{"PrometheusRule", "PodMonitor", "ServiceMonitor"} {
		if got[k] != 0 {
			t.Errorf("%s rendered without being enabled", k)
		}
	}
}

// TestCustomValues: values from testdata/custom-values.yaml (other brokers'
// port, metrics port, recovery timeout, sizing, the Operator objects on)
// reach the rendered objects, which still pass every check.
func TestCustomValues(t *testing.T) {
	objs := render(t, filepath.Join("testdata", "custom-values.yaml"), nil)
	for _, err := range k8scheck.Check(objs, defaults(t)) {
		t.Error(err)
	}
	got := kinds(objs)
	for _, k := range []string{"PrometheusRule", "PodMonitor", "ServiceMonitor"} {
		if got[k] != 1 {
			t.Errorf("want one %s, rendered %d", k, got[k])
		}
	}
	for _, o := range objs {
		if o.Kind == "ConfigMap" {
			data := o.Raw["data"].(map[string]any)
			if data["METRICS_ADDR"] != ":9500" || data["PRODUCE_RECOVERY_TIMEOUT"] != "3m" {
				t.Errorf("ConfigMap does not carry the custom values: %v", data)
			}
		}
	}
	// The checks see the custom values: the default liveness probe does
	// not outlast a 3m recovery timeout.
	objs = render(t, filepath.Join("testdata", "custom-values.yaml"), map[string]any{
		"probes": map[string]any{"liveness": map[string]any{"failureThreshold": 9}},
	})
	var msgs []string
	for _, err := range k8scheck.Check(objs, defaults(t)) {
		msgs = append(msgs, err.Error())
	}
	if !strings.Contains(strings.Join(msgs, "\n"), "PRODUCE_RECOVERY_TIMEOUT 3m0s") {
		t.Errorf("a liveness probe shorter than the custom recovery timeout passed: %v", msgs)
	}
}

// TestMissingBrokers: the chart refuses to render without KAFKA_BROKERS, as
// the binary refuses to start without it.
func TestMissingBrokers(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(ch, map[string]any{"config": map[string]any{"KAFKA_BROKERS": ""}},
		chartutil.ReleaseOptions{Name: "dedup", Namespace: "streaming", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Render(ch, rv); err == nil || !strings.Contains(err.Error(), "KAFKA_BROKERS") {
		t.Errorf("render without KAFKA_BROKERS: %v, want an error naming it", err)
	}
}

// TestPrometheusRuleIsAlertsYml: the rendered PrometheusRule carries exactly
// the groups of deploy/prometheus/alerts.yml (the chart's files/alerts.yml
// is a copy: Helm does not read files outside the chart).
func TestPrometheusRuleIsAlertsYml(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(src) != string(cp) {
		t.Errorf("deploy/helm/dedup/files/alerts.yml differs from deploy/prometheus/alerts.yml: cp deploy/prometheus/alerts.yml deploy/helm/dedup/files/")
	}
	var want any
	if err := yaml.Unmarshal(src, &want); err != nil {
		t.Fatal(err)
	}
	objs := render(t, "", map[string]any{"prometheusRule": map[string]any{"enabled": true}})
	found := false
	for _, o := range objs {
		if o.Kind != "PrometheusRule" {
			continue
		}
		found = true
		var spec any
		b, _ := yaml.Marshal(o.Raw["spec"])
		if err := yaml.Unmarshal(b, &spec); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(spec, want) {
			t.Errorf("rendered PrometheusRule spec differs from deploy/prometheus/alerts.yml")
		}
	}
	if !found {
		t.Error("prometheusRule.enabled rendered no PrometheusRule")
	}
}

// splitValues deploys the hops apart: repartition.hops split.
var splitValues = map[string]any{
	"config":      map[string]any{"REPARTITION_TOPIC": "events-by-id"},
	"repartition": map[string]any{"hops": "split"},
}

// named returns the object of kind and name, failing the test without it.
func named(t *testing.T, objs []k8scheck.Object, kind, name string) map[string]any {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Name == name {
			return o.Raw
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// TestSplitHops: repartition.hops split renders the hops as two
// Deployments, dedup-rekey (REPARTITION_HOPS=rekey, its own ConfigMap
// without hop 2's settings, memory of `dedup size --hops rekey`) and
// dedup-dedup (REPARTITION_HOPS=dedup, the shared ConfigMap), each with its
// own PodDisruptionBudget, one Service, NetworkPolicy and PodMonitor for
// both; every check holds (k8scheck: env valid, roles, probes on /healthz
// and /readyz, memory per role).
func TestSplitHops(t *testing.T) {
	objs := render(t, "", map[string]any{"config": splitValues["config"], "repartition": splitValues["repartition"],
		"podMonitor": map[string]any{"enabled": true}})
	for _, err := range k8scheck.Check(objs, defaults(t)) {
		t.Error(err)
	}
	got := kinds(objs)
	for k, n := range map[string]int{"Deployment": 2, "ConfigMap": 2, "PodDisruptionBudget": 2, "Service": 1, "NetworkPolicy": 1, "ServiceAccount": 1, "PodMonitor": 1} {
		if got[k] != n {
			t.Errorf("want %d %s, rendered %d", n, k, got[k])
		}
	}
	for _, role := range []string{"rekey", "dedup"} {
		var dep k8scheck.Deployment
		if err := k8scheck.DecodeInto(named(t, objs, "Deployment", "dedup-"+role), &dep); err != nil {
			t.Fatal(err)
		}
		ctr := dep.Spec.Template.Spec.Containers[0]
		hops := ""
		for _, e := range ctr.Env {
			if e.Name == "REPARTITION_HOPS" {
				hops = e.Value
			}
		}
		if hops != role || dep.Spec.Template.Metadata.Labels["dedup/hops"] != role || dep.Spec.Selector.MatchLabels["dedup/hops"] != role {
			t.Errorf("Deployment dedup-%s: REPARTITION_HOPS %q, pod label %q, selector %v: want %s", role, hops,
				dep.Spec.Template.Metadata.Labels["dedup/hops"], dep.Spec.Selector.MatchLabels, role)
		}
		wantCM := map[string]string{"rekey": "dedup-rekey-config", "dedup": "dedup-config"}[role]
		if cm := ctr.EnvFrom[0].ConfigMapRef; cm == nil || cm.Name != wantCM {
			t.Errorf("Deployment dedup-%s loads %+v, want ConfigMap %s", role, ctr.EnvFrom[0], wantCM)
		}
		pdb := named(t, objs, "PodDisruptionBudget", "dedup-"+role)
		if sel := pdb["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any); sel["dedup/hops"] != role {
			t.Errorf("PodDisruptionBudget dedup-%s selects %v", role, sel)
		}
	}
	// The rekey pods hold no filters, checkpoints or output: their
	// ConfigMap names none, and their memory is hop 1's alone.
	rekeyData := named(t, objs, "ConfigMap", "dedup-rekey-config")["data"].(map[string]any)
	for _, k := range k8scheck.Hop2Only {
		if _, ok := rekeyData[k]; ok {
			t.Errorf("dedup-rekey-config sets %s", k)
		}
	}
	dedupData := named(t, objs, "ConfigMap", "dedup-config")["data"].(map[string]any)
	for k, v := range rekeyData {
		if dedupData[k] != v {
			t.Errorf("%s: rekey %v, dedup %v: the hops share every setting hop 1 reads", k, v, dedupData[k])
		}
	}
	var rekey, dedup k8scheck.Deployment
	_ = k8scheck.DecodeInto(named(t, objs, "Deployment", "dedup-rekey"), &rekey)
	_ = k8scheck.DecodeInto(named(t, objs, "Deployment", "dedup-dedup"), &dedup)
	rq, _ := k8scheck.ParseQuantity(rekey.Spec.Template.Spec.Containers[0].Resources.Limits["memory"])
	dq, _ := k8scheck.ParseQuantity(dedup.Spec.Template.Spec.Containers[0].Resources.Limits["memory"])
	if rq >= dq {
		t.Errorf("rekey memory limit %d not below dedup's %d: hop 1 holds no filters", rq, dq)
	}
}

// TestSplitChecksCatch: the checks that pass on the split rendering fail
// when it goes wrong.
func TestSplitChecksCatch(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		mutate     func(t *testing.T, objs []k8scheck.Object)
	}{
		{"rekey pods given the checkpoint topic", "CHECKPOINT_TOPIC, which only hop 2 reads", func(t *testing.T, objs []k8scheck.Object) {
			named(t, objs, "ConfigMap", "dedup-rekey-config")["data"].(map[string]any)["CHECKPOINT_TOPIC"] = "x"
		}},
		{"hops with different groups", "GROUP_ID", func(t *testing.T, objs []k8scheck.Object) {
			named(t, objs, "ConfigMap", "dedup-rekey-config")["data"].(map[string]any)["GROUP_ID"] = "other"
		}},
		{"both Deployments rekey", "want both hops", func(t *testing.T, objs []k8scheck.Object) {
			ctr := named(t, objs, "Deployment", "dedup-dedup")["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			ctr["env"].([]any)[0].(map[string]any)["value"] = "rekey"
		}},
		{"one budget for both hops", "PodDisruptionBudgets select its pods", func(t *testing.T, objs []k8scheck.Object) {
			sel := named(t, objs, "PodDisruptionBudget", "dedup-dedup")["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
			delete(sel, "dedup/hops")
		}},
		{"overlapping selectors", "a selector takes the other's pods", func(t *testing.T, objs []k8scheck.Object) {
			sel := named(t, objs, "Deployment", "dedup-dedup")["spec"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
			delete(sel, "dedup/hops")
		}},
		{"rekey memory below hop 1's", "Deployment dedup-rekey: memory request", func(t *testing.T, objs []k8scheck.Object) {
			ctr := named(t, objs, "Deployment", "dedup-rekey")["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			ctr["resources"].(map[string]any)["requests"].(map[string]any)["memory"] = "32Mi"
		}},
		{"dedup sized without its partitions", "dedup/repartition-partitions", func(t *testing.T, objs []k8scheck.Object) {
			delete(named(t, objs, "Deployment", "dedup-dedup")["metadata"].(map[string]any)["annotations"].(map[string]any), "dedup/repartition-partitions")
		}},
		{"rekey readiness on /healthz", "Deployment dedup-rekey: container dedup: readinessProbe path", func(t *testing.T, objs []k8scheck.Object) {
			ctr := named(t, objs, "Deployment", "dedup-rekey")["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			ctr["readinessProbe"].(map[string]any)["httpGet"].(map[string]any)["path"] = "/healthz"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, "", splitValues)
			tc.mutate(t, objs)
			var msgs []string
			for _, err := range k8scheck.Check(objs, defaults(t)) {
				msgs = append(msgs, err.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Errorf("want an error naming %q, got %q", tc.want, msgs)
			}
		})
	}
}

// TestSplitRefused: split needs REPARTITION_TOPIC, sets REPARTITION_HOPS
// itself, and repartition.hops takes both or split only; each refusal
// names what to fix.
func TestSplitRefused(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"repartition": map[string]any{"hops": "split"}}, "config.REPARTITION_TOPIC"},
		{map[string]any{"repartition": map[string]any{"hops": "split"}, "config": map[string]any{"REPARTITION_TOPIC": "r", "REPARTITION_HOPS": "dedup"}}, "config.REPARTITION_HOPS"},
		{map[string]any{"repartition": map[string]any{"hops": "rekey"}}, "repartition.hops must be both or split"},
	} {
		rv, err := chartutil.ToRenderValues(ch, tc.vals, chartutil.ReleaseOptions{Name: "dedup", Namespace: "streaming", IsInstall: true}, chartutil.DefaultCapabilities)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Render(ch, rv); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: render error %v, want one naming %q", tc.vals, err, tc.want)
		}
	}
}
