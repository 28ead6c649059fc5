package deploy_test

import (
	"testing"

	"dedup/deploy/k8scheck"
)

// TestKubernetesHardening runs the checks shared with the Helm chart
// (deploy/k8scheck) on the plain manifests: no service-account token,
// non-root, read-only root, no capabilities, RuntimeDefault seccomp, a
// NetworkPolicy for the metrics port, DNS and the brokers, liveness
// tolerating PRODUCE_RECOVERY_TIMEOUT, and memory from `dedup size`.
func TestKubernetesHardening(t *testing.T) {
	objs := loadManifests(t)
	defaults, err := k8scheck.ConfigDefaults(path("internal", "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range k8scheck.Check(objs, k8scheck.Options{ConfigDefaults: defaults}) {
		t.Error(err)
	}
}
