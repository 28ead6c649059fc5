package deploy_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// runbookBase is where runbook_url points: docs/operations.md, published.
const runbookBase = "https://dedup.example/docs/operations.md#"

// alertTests is deploy/prometheus/alerts_test.yml, as far as this test reads it.
type alertTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `yaml:"exp_labels"`
				ExpAnnotations map[string]string `yaml:"exp_annotations"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestAlertConventions: every alert follows the convention Alertmanager
// templates and kube-prometheus expect (summary, description, runbook_url),
// its runbook_url lands on an anchor of docs/operations.md followed by the
// alert's own section, and alerts_test.yml has a promtool case in which it
// fires (promtool then checks the rendered annotations too).
func TestAlertConventions(t *testing.T) {
	rf := loadRules(t)
	ops, err := os.ReadFile(path("docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	var tests alertTests
	decodeInto(t, loadYAML(t, path("deploy", "prometheus", "alerts_test.yml")), &tests)
	fires := map[string]bool{}
	tested := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			tested[a.Alertname] = true
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
			for _, e := range a.ExpAlerts {
				if _, ok := e.ExpAnnotations["runbook"]; ok {
					t.Errorf("alerts_test.yml %s: expects the old runbook annotation", a.Alertname)
				}
			}
		}
	}
	var alerts []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			anchor := strings.ToLower(r.Alert)
			for _, k := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[k]) == "" {
					t.Errorf("alert %s: no %s annotation", r.Alert, k)
				}
			}
			for k := range r.Annotations {
				if !slices.Contains([]string{"summary", "description", "runbook_url"}, k) {
					t.Errorf("alert %s: annotation %q is outside the convention (summary, description, runbook_url)", r.Alert, k)
				}
			}
			if got, want := r.Annotations["runbook_url"], runbookBase+anchor; got != want {
				t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, got, want)
			}
			// The anchor, then (after blank lines) the alert's own heading.
			section := regexp.MustCompile(`<a id="` + regexp.QuoteMeta(anchor) + `"></a>\s*\n#+ ` + regexp.QuoteMeta(r.Alert) + `\b`)
			if !section.Match(ops) {
				t.Errorf("docs/operations.md: no `<a id=%q></a>` anchor followed by a %s heading", anchor, r.Alert)
			}
			if !tested[r.Alert] {
				t.Errorf("alert %s: no promtool unit test in deploy/prometheus/alerts_test.yml", r.Alert)
			} else if !fires[r.Alert] {
				t.Errorf("alert %s: alerts_test.yml never expects it to fire", r.Alert)
			}
		}
	}
	// No anchor without an alert: a renamed alert must not leave a dead section.
	for _, m := range regexp.MustCompile(`<a id="(dedup[a-z]+)"></a>`).FindAllSubmatch(ops, -1) {
		if !slices.ContainsFunc(alerts, func(a string) bool { return strings.ToLower(a) == string(m[1]) }) {
			t.Errorf("docs/operations.md: anchor %q names no alert in alerts.yml", m[1])
		}
	}
}

// TestHelmChartAlerts: the Helm chart's PrometheusRule reads a copy of
// alerts.yml (Helm reads no file outside the chart); the copy stays equal.
// deploy/helm/chartcheck renders it with Helm.
func TestHelmChartAlerts(t *testing.T) {
	src, err := os.ReadFile(path("deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(path("deploy", "helm", "dedup", "files", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if string(src) != string(cp) {
		t.Error("deploy/helm/dedup/files/alerts.yml differs from deploy/prometheus/alerts.yml: cp deploy/prometheus/alerts.yml deploy/helm/dedup/files/")
	}
}
