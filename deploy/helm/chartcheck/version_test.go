package chartcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"

	"dedup/deploy/k8scheck"
)

// TestAppVersion: the chart's appVersion is the stage's version
// (internal/buildinfo/VERSION, what `dedup version` reports), and the pods
// run the image of that tag unless image.tag names another.
func TestAppVersion(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "internal", "buildinfo", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(raw))
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	if ch.Metadata.AppVersion != version {
		t.Errorf("Chart.yaml appVersion %q, internal/buildinfo/VERSION %q", ch.Metadata.AppVersion, version)
	}
	for _, tc := range []struct {
		overrides map[string]any
		want      string
	}{
		{nil, "dedup:" + version},
		{map[string]any{"image": map[string]any{"tag": "1.2.3-rc.1"}}, "dedup:1.2.3-rc.1"},
	} {
		var dep k8scheck.Deployment
		if err := k8scheck.DecodeInto(named(t, render(t, "", tc.overrides), "Deployment", "dedup"), &dep); err != nil {
			t.Fatal(err)
		}
		if got := dep.Spec.Template.Spec.Containers[0].Image; got != tc.want {
			t.Errorf("values %v: image %q, want %q", tc.overrides, got, tc.want)
		}
	}
}
