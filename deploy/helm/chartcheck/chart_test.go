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

// TestLint runs Helm's own chart linter (`helm lint`).
func TestLint(t *testing.T) {
	res := lint.All(chartDir, map[string]any{}, "streaming", false)
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
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
