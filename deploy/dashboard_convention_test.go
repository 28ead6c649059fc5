package deploy_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// panelUnits reads each panel's unit and axis label, which loadDashboard's
// types leave out.
func panelUnits(t *testing.T) map[string][2]string {
	t.Helper()
	raw, err := os.ReadFile(path("deploy", "grafana", "dashboards", "dedup.json"))
	if err != nil {
		t.Fatal(err)
	}
	type fp struct {
		Title       string `json:"title"`
		FieldConfig struct {
			Defaults struct {
				Unit   string `json:"unit"`
				Custom struct {
					AxisLabel string `json:"axisLabel"`
				} `json:"custom"`
			} `json:"defaults"`
		} `json:"fieldConfig"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string][2]string{}
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, r := range ps {
			var p fp
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatal(err)
			}
			out[p.Title] = [2]string{p.FieldConfig.Defaults.Unit, p.FieldConfig.Defaults.Custom.AxisLabel}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// TestDashboardScope: the dashboard serves several stages in one Grafana:
// `job` and `instance` variables scope every series of every query (and
// the topic and partition variables' own queries), and the process row
// shows memory against the stage's own prediction, GC, CPU and goroutines.
func TestDashboardScope(t *testing.T) {
	d := loadDashboard(t)
	vars := map[string]string{}
	var order []string
	for _, v := range d.Templating.List {
		q := ""
		switch x := v.Query.(type) {
		case string:
			q = x
		case map[string]any:
			q, _ = x["query"].(string)
		}
		vars[v.Name] = q
		order = append(order, v.Name)
	}
	for _, want := range []string{"job", "instance", "topic", "partition"} {
		if _, ok := vars[want]; !ok {
			t.Errorf("no %q template variable", want)
		}
	}
	// Each variable's query is scoped by the ones before it.
	for i, name := range order {
		for _, before := range order[:i] {
			if slices.Contains([]string{"job", "instance"}, before) && name != "datasource" && !strings.Contains(vars[name], before+`=~"$`+before+`"`) {
				t.Errorf("variable %s: query %q is not scoped by $%s", name, vars[name], before)
			}
		}
	}
	var all []string
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			all = append(all, tg.Expr)
			for _, sel := range selectors(tg.Expr) {
				for _, m := range []string{`job=~"$job"`, `instance=~"$instance"`} {
					if !strings.Contains(sel, m) {
						t.Errorf("panel %q: selector %s lacks %s", p.Title, sel, m)
					}
				}
			}
		}
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{"process_resident_memory_bytes", "dedup_memory_predicted_bytes",
		"go_gc_duration_seconds", "rate(process_cpu_seconds_total", "go_goroutines"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no dashboard query uses %s", want)
		}
	}

	// Units: records are not requests.
	units := panelUnits(t)
	for title, u := range units {
		if u[0] == "reqps" {
			t.Errorf("panel %q: unit reqps (requests/s); record rates are short with a records/s label", title)
		}
		if strings.Contains(strings.ToLower(title), "records") && strings.Contains(title, "/s") || strings.Contains(title, "per second") && strings.Contains(strings.ToLower(title), "record") {
			if u[1] != "records/s" && !strings.Contains(u[0], "rec/s") {
				t.Errorf("panel %q: unit %q, axis label %q: want records/s", title, u[0], u[1])
			}
		}
	}
	for title, want := range map[string]string{"Resident memory vs predicted": "bytes", "GC pause": "s"} {
		if units[title][0] != want {
			t.Errorf("panel %q: unit %q, want %q", title, units[title][0], want)
		}
	}
}
