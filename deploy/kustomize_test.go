package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"dedup/deploy/k8scheck"
)

// kustomization is the part of a kustomization.yaml that kustomize below
// builds.
type kustomization struct {
	Resources []string `yaml:"resources"`
	Patches   []struct {
		Path string `yaml:"path"`
	} `yaml:"patches"`
	Images []struct {
		Name    string `yaml:"name"`
		NewName string `yaml:"newName"`
		NewTag  string `yaml:"newTag"`
	} `yaml:"images"`
}

// kustomize builds dir as `kubectl kustomize` does for what the shipped
// kustomizations use: resources (files, and directories as bases),
// strategic-merge patches by kind and name (maps merged, null deleting a
// key, lists of maps merged by name or topologyKey), and image rewrites.
// Base labels are left out: they touch no selector (includeSelectors:
// false). TestKustomizeMatchesKubectl holds it to the real one.
func kustomize(t *testing.T, dir string) []k8scheck.Object {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatalf("%s/kustomization.yaml: %v", dir, err)
	}
	var objs []k8scheck.Object
	for _, r := range k.Resources {
		p := filepath.Join(dir, r)
		if st, err := os.Stat(p); err != nil {
			t.Fatalf("%s: resource %s: %v", dir, r, err)
		} else if st.IsDir() {
			objs = append(objs, kustomize(t, p)...)
			continue
		}
		o, err := k8scheck.DecodeFiles(p)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o...)
	}
	for _, p := range k.Patches {
		patches, err := k8scheck.DecodeFiles(filepath.Join(dir, p.Path))
		if err != nil {
			t.Fatal(err)
		}
		for _, patch := range patches {
			i := slices.IndexFunc(objs, func(o k8scheck.Object) bool { return o.Kind == patch.Kind && o.Name == patch.Name })
			if i < 0 {
				t.Fatalf("%s: patch %s targets %s %s, which is not among the resources", dir, p.Path, patch.Kind, patch.Name)
			}
			objs[i].Raw = mergePatch(objs[i].Raw, patch.Raw).(map[string]any)
		}
	}
	for _, img := range k.Images {
		for _, o := range objs {
			if o.Kind != "Deployment" {
				continue
			}
			ctrs := o.Raw["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
			for _, c := range ctrs {
				c := c.(map[string]any)
				if name, _, _ := strings.Cut(c["image"].(string), ":"); name == img.Name {
					c["image"] = img.NewName + ":" + img.NewTag
				}
			}
		}
	}
	return objs
}

// mergePatch applies a strategic-merge patch to dst (a decoded document).
func mergePatch(dst, patch any) any {
	switch p := patch.(type) {
	case map[string]any:
		d, ok := dst.(map[string]any)
		if !ok {
			d = map[string]any{}
		}
		for k, v := range p {
			if v == nil {
				delete(d, k)
				continue
			}
			d[k] = mergePatch(d[k], v)
		}
		return d
	case []any:
		d, ok := dst.([]any)
		if !ok {
			return p
		}
		key := ""
		if len(p) > 0 {
			if m, ok := p[0].(map[string]any); ok {
				for _, k := range []string{"name", "topologyKey"} {
					if _, ok := m[k]; ok {
						key = k
						break
					}
				}
			}
		}
		if key == "" {
			return p
		}
		var added []any
		for _, pe := range p {
			pm := pe.(map[string]any)
			i := slices.IndexFunc(d, func(de any) bool { m, ok := de.(map[string]any); return ok && m[key] == pm[key] })
			if i < 0 {
				added = append(added, pe)
				continue
			}
			d[i] = mergePatch(d[i], pe)
		}
		// kustomize puts the new entries first.
		return append(added, d...)
	}
	return patch
}

// configData is a ConfigMap's data.
func configData(t *testing.T, objs []k8scheck.Object, name string) map[string]string {
	t.Helper()
	for _, o := range objs {
		if o.Kind == "ConfigMap" && o.Name == name {
			var cm struct {
				Data map[string]string `yaml:"data"`
			}
			decodeInto(t, o.Raw, &cm)
			return cm.Data
		}
	}
	t.Fatalf("no ConfigMap %s", name)
	return nil
}

// TestKubernetesHopsSplit: the overlay deploy/kubernetes-hops-split runs
// the hops apart: the base's Deployment as hop 2 (REPARTITION_HOPS=dedup)
// and dedup-rekey as hop 1, each with its PodDisruptionBudget, and passes
// every check the base passes (deploy/k8scheck: env valid, roles,
// selectors, probes on /healthz and /readyz, memory per role). The rekey
// ConfigMap leaves out hop 2's settings and equals the base's in every
// other one it could drift from.
func TestKubernetesHopsSplit(t *testing.T) {
	objs := kustomize(t, path("deploy", "kubernetes-hops-split"))
	defaults, err := k8scheck.ConfigDefaults(path("internal", "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range k8scheck.Check(objs, k8scheck.Options{ConfigDefaults: defaults}) {
		t.Error(err)
	}
	roles := map[string]string{}
	pdbs := 0
	for _, o := range objs {
		switch o.Kind {
		case "Deployment":
			var dep k8scheck.Deployment
			decodeInto(t, o.Raw, &dep)
			for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "REPARTITION_HOPS" {
					roles[o.Name] = e.Value
				}
			}
			if img := dep.Spec.Template.Spec.Containers[0].Image; img != dedupImage+":latest" {
				t.Errorf("Deployment %s: image %q: want the kustomization's %s:latest", o.Name, img, dedupImage)
			}
		case "PodDisruptionBudget":
			pdbs++
		}
	}
	if want := map[string]string{"dedup": "dedup", "dedup-rekey": "rekey"}; !reflect.DeepEqual(roles, want) {
		t.Errorf("Deployments and their REPARTITION_HOPS %v, want %v", roles, want)
	}
	if pdbs != 2 {
		t.Errorf("%d PodDisruptionBudgets, want one per hop", pdbs)
	}
	base, rekey := configData(t, objs, "dedup-config"), configData(t, objs, "dedup-rekey-config")
	for k, v := range base {
		switch {
		case slices.Contains(k8scheck.Hop2Only, k):
			if _, ok := rekey[k]; ok {
				t.Errorf("dedup-rekey-config sets %s, which only hop 2 reads", k)
			}
		case rekey[k] != v:
			t.Errorf("dedup-rekey-config %s=%q, dedup-config %q: keep the settings hop 1 reads equal", k, rekey[k], v)
		}
	}
	for k := range rekey {
		if _, ok := base[k]; !ok {
			t.Errorf("dedup-rekey-config sets %s, dedup-config does not", k)
		}
	}
}

// TestKustomizeMatchesKubectl: where kubectl is installed, the real
// `kubectl kustomize` builds deploy/kubernetes-hops-split to the same
// Deployments, ConfigMaps and PodDisruptionBudgets as kustomize above,
// and that build passes the checks too.
func TestKustomizeMatchesKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed")
	}
	out, err := exec.Command(kubectl, "kustomize", path("deploy", "kubernetes-hops-split")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	real, err := k8scheck.Decode("kubectl kustomize", out)
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := k8scheck.ConfigDefaults(path("internal", "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range k8scheck.Check(real, k8scheck.Options{ConfigDefaults: defaults}) {
		t.Error(err)
	}
	index := func(objs []k8scheck.Object) map[string]any {
		m := map[string]any{}
		for _, o := range objs {
			switch o.Kind {
			case "Deployment", "PodDisruptionBudget":
				m[o.Kind+"/"+o.Name] = normal(t, o.Raw["spec"])
			case "ConfigMap":
				m[o.Kind+"/"+o.Name] = normal(t, o.Raw["data"])
			}
		}
		return m
	}
	mine, theirs := index(kustomize(t, path("deploy", "kubernetes-hops-split"))), index(real)
	for k, v := range theirs {
		if !reflect.DeepEqual(mine[k], v) {
			a, _ := yaml.Marshal(mine[k])
			b, _ := yaml.Marshal(v)
			t.Errorf("%s differs:\nbuilt here:\n%s\nkubectl kustomize:\n%s", k, a, b)
		}
	}
	if len(mine) != len(theirs) {
		t.Errorf("built here %d objects, kubectl %d", len(mine), len(theirs))
	}
}

// normal round-trips v through YAML so that numbers and maps compare alike.
func normal(t *testing.T, v any) any {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatal(fmt.Errorf("normalise: %w", err))
	}
	return out
}
