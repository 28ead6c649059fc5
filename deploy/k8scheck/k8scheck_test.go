package k8scheck

import (
	"path/filepath"
	"strings"
	"testing"
)

func manifests(t *testing.T) ([]Object, Options) {
	t.Helper()
	objs, err := DecodeFiles(filepath.Join("..", "kubernetes", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := ConfigDefaults(filepath.Join("..", "..", "internal", "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	return objs, Options{ConfigDefaults: defaults}
}

// dig returns the map at a path of keys and list indexes ("0").
func dig(t *testing.T, v any, keys ...string) map[string]any {
	t.Helper()
	for _, k := range keys {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i := 0
			for _, c := range k {
				i = i*10 + int(c-'0')
			}
			v = x[i]
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%v is not a map", keys)
	}
	return m
}

func find(objs []Object, kind string) map[string]any {
	for _, o := range objs {
		if o.Kind == kind {
			return o.Raw
		}
	}
	return nil
}

// TestCheckCatches: each weakening of the shipped manifests is reported,
// so the checks that pass on them (deploy and Helm tests) can fail.
func TestCheckCatches(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		mutate     func(t *testing.T, objs []Object) []Object
	}{
		{"token mounted on the pod", "automountServiceAccountToken", set("Deployment", "automountServiceAccountToken", []string{"spec", "template", "spec"}, true)},
		{"token mounted by the service account", "ServiceAccount dedup", func(t *testing.T, objs []Object) []Object {
			delete(find(objs, "ServiceAccount"), "automountServiceAccountToken")
			return objs
		}},
		{"writable root", "readOnlyRootFilesystem", set("Deployment", "readOnlyRootFilesystem", []string{"spec", "template", "spec", "containers", "0", "securityContext"}, false)},
		{"capabilities kept", "capabilities", func(t *testing.T, objs []Object) []Object {
			delete(dig(t, find(objs, "Deployment"), "spec", "template", "spec", "containers", "0", "securityContext"), "capabilities")
			return objs
		}},
		{"init container without hardening", "container check", set("Deployment", "initContainers", []string{"spec", "template", "spec"}, []any{map[string]any{"name": "check", "image": "dedup"}})},
		{"root allowed", "runAsNonRoot", func(t *testing.T, objs []Object) []Object {
			delete(dig(t, find(objs, "Deployment"), "spec", "template", "spec", "securityContext"), "runAsNonRoot")
			return objs
		}},
		{"no seccomp", "seccompProfile", func(t *testing.T, objs []Object) []Object {
			delete(dig(t, find(objs, "Deployment"), "spec", "template", "spec", "securityContext"), "seccompProfile")
			return objs
		}},
		{"no network policy", "no NetworkPolicy", func(t *testing.T, objs []Object) []Object {
			var out []Object
			for _, o := range objs {
				if o.Kind != "NetworkPolicy" {
					out = append(out, o)
				}
			}
			return out
		}},
		{"ingress open to every port", "ingress rule without ports", set("NetworkPolicy", "ingress", []string{"spec"}, []any{map[string]any{}})},
		{"brokers on another port", "broker port 9093", set("ConfigMap", "KAFKA_BROKERS", []string{"data"}, "kafka:9093")},
		{"liveness shorter than the recovery timeout", "PRODUCE_RECOVERY_TIMEOUT", set("Deployment", "failureThreshold", []string{"spec", "template", "spec", "containers", "0", "livenessProbe"}, 3)},
		{"recovery timeout raised in the ConfigMap", "PRODUCE_RECOVERY_TIMEOUT 5m0s", set("ConfigMap", "PRODUCE_RECOVERY_TIMEOUT", []string{"data"}, "5m")},
		{"readiness slower than liveness", "readinessProbe", set("Deployment", "failureThreshold", []string{"spec", "template", "spec", "containers", "0", "readinessProbe"}, 100)},
		{"a variable the binary does not read", "DEDUP_EXPECTED_KEY,", set("ConfigMap", "DEDUP_EXPECTED_KEY", []string{"data"}, "5")},
		{"more keys than the memory fits", "memory request", set("ConfigMap", "DEDUP_EXPECTED_KEYS", []string{"data"}, "50000000")},
		{"readiness on /healthz", "readinessProbe path \"/healthz\"", set("Deployment", "path", []string{"spec", "template", "spec", "containers", "0", "readinessProbe", "httpGet"}, "/healthz")},
		{"liveness on another port", "livenessProbe port 8080", set("Deployment", "port", []string{"spec", "template", "spec", "containers", "0", "livenessProbe", "httpGet"}, 8080)},
		{"a role without a repartition topic", "REPARTITION_HOPS rekey without REPARTITION_TOPIC", set("ConfigMap", "REPARTITION_HOPS", []string{"data"}, "rekey")},
		{"an unknown role", "REPARTITION_HOPS \"split\"", func(t *testing.T, objs []Object) []Object {
			data := dig(t, find(objs, "ConfigMap"), "data")
			data["REPARTITION_TOPIC"], data["REPARTITION_HOPS"] = "events-by-id", "split"
			return objs
		}},
		{"a misspelt variable in env", "env sets GOMEMLIMT", func(t *testing.T, objs []Object) []Object {
			ctr := dig(t, find(objs, "Deployment"), "spec", "template", "spec", "containers", "0")
			ctr["env"] = append(ctr["env"].([]any), map[string]any{"name": "GOMEMLIMT", "value": "1GiB"})
			return objs
		}},
		{"repartitioned without hop 1's memory", "memory limit", func(t *testing.T, objs []Object) []Object {
			// 6 input partitions' hop 1 readers (about 4 MiB each) on top
			// of the one-hop sizing: the shipped limit falls short.
			dig(t, find(objs, "ConfigMap"), "data")["REPARTITION_TOPIC"] = "events-by-id"
			return objs
		}},
		{"two budgets for one pod", "2 PodDisruptionBudgets", func(t *testing.T, objs []Object) []Object {
			for _, o := range objs {
				if o.Kind == "PodDisruptionBudget" {
					return append(objs, o)
				}
			}
			return objs
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, opts := manifests(t)
			if errs := Check(objs, opts); len(errs) != 0 {
				t.Fatalf("the shipped manifests fail: %v", errs)
			}
			objs, opts = manifests(t)
			errs := Check(tc.mutate(t, objs), opts)
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Errorf("want an error naming %q, got %q", tc.want, msgs)
			}
		})
	}
}

// set is a change to the manifests: the field key of the map at path in
// the first object of kind set to value.
func set(kind, key string, path []string, value any) func(*testing.T, []Object) []Object {
	return func(t *testing.T, objs []Object) []Object {
		dig(t, find(objs, kind), path...)[key] = value
		return objs
	}
}
