package deploy_test

import (
	"os"
	"path/filepath"
	"testing"

	"dedup/deploy/k8scheck"
)

// TestKubernetesHardening runs the checks shared with the Helm chart
// (deploy/k8scheck) on the plain manifests: no service-account token,
// non-root, read-only root, no capabilities, RuntimeDefault seccomp, a
// NetworkPolicy for the metrics port, DNS and the brokers, liveness
// tolerating PRODUCE_RECOVERY_TIMEOUT, and memory from `dedup size`.
func TestKubernetesHardening(t *testing.T) {
	objs := kubernetesObjects(t)
	defaults, err := k8scheck.ConfigDefaults(path("internal", "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range k8scheck.Check(objs, k8scheck.Options{ConfigDefaults: defaults}) {
		t.Error(err)
	}
}

func kubernetesObjects(t *testing.T) []k8scheck.Object {
	t.Helper()
	files, err := filepath.Glob(path("deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	var objs []k8scheck.Object
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o, err := k8scheck.Decode(filepath.Base(f), raw)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	return objs
}
