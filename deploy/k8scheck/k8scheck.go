// Package k8scheck holds the checks every Kubernetes rendering of the stage
// must pass: the plain manifests in deploy/kubernetes (deploy tests) and the
// Helm chart's rendered templates (deploy/helm/chartcheck, a nested module
// that imports this package), so that the two cannot drift apart.
//
// The checks: the pod does not mount a service-account token, runs non-root
// with a read-only root filesystem, no capabilities and the RuntimeDefault
// seccomp profile (init containers included); a NetworkPolicy lets in only
// the metrics port and lets out only DNS and the Kafka brokers; the liveness
// probe tolerates PRODUCE_RECOVERY_TIMEOUT and readiness reacts faster; the
// memory resources and GOMEMLIMIT follow the model `dedup size` prints;
// the probes ask /healthz (liveness, startup) and /readyz (readiness) on
// the metrics port.
//
// Every Deployment is checked so (errors name it when there are several).
// With REPARTITION_TOPIC the hops may run as Deployments of their own
// (REPARTITION_HOPS): then each sets a valid role, together they run both
// hops with the same group, topics and key, their selectors and
// PodDisruptionBudgets keep to their own pods, a rekey pod is given none of
// hop 2's settings (Hop2Only), and each is sized for its role (`dedup size
// --hops`).
package k8scheck

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"dedup/rotation"
	"dedup/sizing"
)

// Object is one Kubernetes document.
type Object struct {
	Source string // file or template it came from
	Kind   string
	Name   string
	Raw    map[string]any
}

// Decode reads every document of a multi-document YAML stream.
func Decode(source string, data []byte) ([]Object, error) {
	var objs []Object
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decode %s: %w", source, err)
		}
		if m == nil {
			continue
		}
		kind, _ := m["kind"].(string)
		meta, _ := m["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		objs = append(objs, Object{Source: source, Kind: kind, Name: name, Raw: m})
	}
}

// DecodeFiles decodes every file that matches pattern (filepath.Glob),
// each object's Source the file's base name; no match is an error.
func DecodeFiles(pattern string) ([]Object, error) {
	files, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("find manifests: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("find manifests: nothing matches %s", pattern)
	}
	var objs []Object
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read manifest: %w", err)
		}
		o, err := Decode(filepath.Base(f), raw)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	return objs, nil
}

// ConfigVar is one `env` tag of the Config struct: the variable and its
// envDefault ("" when none).
type ConfigVar struct {
	Name, Default string
}

// ConfigVars parses internal/config/config.go (configGo) and returns the
// `env` tags of its Config struct, in declaration order.
func ConfigVars(configGo string) ([]ConfigVar, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, configGo, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	var vars []ConfigVar
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			err = fmt.Errorf("parse config: Config of %s is not a struct", configGo)
			return false
		}
		for _, field := range st.Fields.List {
			if field.Tag == nil {
				continue
			}
			tag, uerr := strconv.Unquote(field.Tag.Value)
			if uerr != nil {
				err = fmt.Errorf("parse config: unquote tag %s: %w", field.Tag.Value, uerr)
				return false
			}
			st := reflect.StructTag(tag)
			if name, _, _ := strings.Cut(st.Get("env"), ","); name != "" {
				vars = append(vars, ConfigVar{Name: name, Default: st.Get("envDefault")})
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	if len(vars) == 0 {
		return nil, fmt.Errorf("parse config: no env tags in Config of %s", configGo)
	}
	return vars, nil
}

// ConfigDefaults is ConfigVars as a map from each variable to its default.
func ConfigDefaults(configGo string) (map[string]string, error) {
	vars, err := ConfigVars(configGo)
	if err != nil {
		return nil, err
	}
	defaults := make(map[string]string, len(vars))
	for _, v := range vars {
		defaults[v.Name] = v.Default
	}
	return defaults, nil
}

// Options are what the checks need besides the objects.
type Options struct {
	// ConfigDefaults maps each variable the binary reads to its default
	// (ConfigDefaults); settings the manifests do not set take it.
	ConfigDefaults map[string]string
	// ProbeMargin is how much longer than PRODUCE_RECOVERY_TIMEOUT the
	// liveness probe must tolerate failures; zero means a quarter of the
	// timeout, at least 15 s.
	ProbeMargin time.Duration
}

// Check runs every check and returns every problem found.
func Check(objs []Object, opts Options) []error {
	c := &checker{opts: opts}
	c.run(objs)
	return c.errs
}

type checker struct {
	opts Options
	errs []error
	// prefix names the Deployment being checked when there are several.
	prefix string
}

func (c *checker) errorf(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	if c.prefix != "" {
		err = fmt.Errorf("%s: %w", c.prefix, err)
	}
	c.errs = append(c.errs, err)
}

// DecodeInto re-decodes a generic YAML value (an Object's Raw) into a
// typed one (a Deployment).
func DecodeInto(v any, out any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return yaml.Unmarshal(b, out)
}

// The typed views of a Deployment's pod that the checks (and the deploy
// tests) decode an Object's Raw into (DecodeInto): the fields they read.

// SecurityContext is a pod's or a container's securityContext.
type SecurityContext struct {
	RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
	RunAsUser                *int  `yaml:"runAsUser"`
	ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	Privileged               *bool `yaml:"privileged"`
	Capabilities             struct {
		Drop []string `yaml:"drop"`
		Add  []string `yaml:"add"`
	} `yaml:"capabilities"`
	SeccompProfile *struct {
		Type string `yaml:"type"`
	} `yaml:"seccompProfile"`
}

// Probe is a container's liveness, readiness or startup probe.
type Probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
	InitialDelaySeconds int `yaml:"initialDelaySeconds"`
	PeriodSeconds       int `yaml:"periodSeconds"`
	TimeoutSeconds      int `yaml:"timeoutSeconds"`
	FailureThreshold    int `yaml:"failureThreshold"`
}

// window is how long the probe may fail before Kubernetes acts, with the
// Kubernetes defaults for fields left out.
func (p Probe) window() time.Duration {
	period, failures := p.PeriodSeconds, p.FailureThreshold
	if period == 0 {
		period = 10
	}
	if failures == 0 {
		failures = 3
	}
	return time.Duration(p.InitialDelaySeconds+period*failures) * time.Second
}

// EnvVar is one entry of a container's env.
type EnvVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		ConfigMapKeyRef *struct {
			Name     string `yaml:"name"`
			Key      string `yaml:"key"`
			Optional *bool  `yaml:"optional"`
		} `yaml:"configMapKeyRef"`
	} `yaml:"valueFrom"`
}

// VolumeMount is one entry of a container's volumeMounts.
type VolumeMount struct {
	MountPath string `yaml:"mountPath"`
}

// Container is one of a pod's containers or init containers.
type Container struct {
	Name  string `yaml:"name"`
	Image string `yaml:"image"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env     []EnvVar `yaml:"env"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name     string `yaml:"name"`
			Optional bool   `yaml:"optional"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	LivenessProbe   *Probe           `yaml:"livenessProbe"`
	ReadinessProbe  *Probe           `yaml:"readinessProbe"`
	StartupProbe    *Probe           `yaml:"startupProbe"`
	SecurityContext *SecurityContext `yaml:"securityContext"`
	VolumeMounts    []VolumeMount    `yaml:"volumeMounts"`
}

// PodSpec is a Deployment's pod template spec.
type PodSpec struct {
	ServiceAccountName            string           `yaml:"serviceAccountName"`
	AutomountServiceAccountToken  *bool            `yaml:"automountServiceAccountToken"`
	TerminationGracePeriodSeconds int              `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               *SecurityContext `yaml:"securityContext"`
	InitContainers                []Container      `yaml:"initContainers"`
	Containers                    []Container      `yaml:"containers"`
}

// Deployment is a Deployment object.
type Deployment struct {
	Metadata struct {
		Name        string            `yaml:"name"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec PodSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type networkPolicy struct {
	Spec struct {
		PodSelector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"podSelector"`
		PolicyTypes []string `yaml:"policyTypes"`
		Ingress     []struct {
			Ports []policyPort `yaml:"ports"`
		} `yaml:"ingress"`
		Egress []struct {
			Ports []policyPort `yaml:"ports"`
		} `yaml:"egress"`
	} `yaml:"spec"`
}

type policyPort struct {
	Protocol string `yaml:"protocol"`
	Port     any    `yaml:"port"`
}

// deployed is one Deployment with its container's effective environment.
type deployed struct {
	name string
	dep  Deployment
	env  map[string]string // defaults, ConfigMaps and env applied
	set  map[string]bool   // the variables the ConfigMaps and env set
	pods map[string]string // the pod template's labels
}

func (c *checker) run(objs []Object) {
	byKind := map[string][]Object{}
	for _, o := range objs {
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	if len(byKind["Deployment"]) == 0 {
		c.errorf("want a Deployment, got none")
		return
	}
	var all []deployed
	for _, o := range byKind["Deployment"] {
		if len(byKind["Deployment"]) > 1 {
			c.prefix = "Deployment " + o.Name
		}
		if d, ok := c.deployment(o, byKind); ok {
			all = append(all, d)
		}
	}
	c.prefix = ""
	if len(all) == len(byKind["Deployment"]) {
		c.hops(all, byKind["PodDisruptionBudget"])
	}
}

// deployment runs the checks of one Deployment; ok when its environment
// could be read.
func (c *checker) deployment(o Object, byKind map[string][]Object) (deployed, bool) {
	var dep Deployment
	if err := DecodeInto(o.Raw, &dep); err != nil {
		c.errorf("decode Deployment: %w", err)
		return deployed{}, false
	}
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		c.errorf("want one container in the pod, got %d", len(pod.Containers))
		return deployed{}, false
	}
	ctr := pod.Containers[0]

	// Service account: its own, with no token mounted (the stage never
	// talks to the Kubernetes API).
	if pod.ServiceAccountName == "" || pod.ServiceAccountName == "default" {
		c.errorf("pod: serviceAccountName %q: want the stage's own ServiceAccount", pod.ServiceAccountName)
	}
	sa := false
	for _, o := range byKind["ServiceAccount"] {
		if o.Name != pod.ServiceAccountName {
			continue
		}
		sa = true
		if v, ok := o.Raw["automountServiceAccountToken"].(bool); !ok || v {
			c.errorf("ServiceAccount %s: want automountServiceAccountToken: false", o.Name)
		}
	}
	if !sa {
		c.errorf("ServiceAccount %q the pod names is not among the objects", pod.ServiceAccountName)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		c.errorf("pod: want automountServiceAccountToken: false")
	}

	// Security contexts: every container, init containers included.
	podSC := pod.SecurityContext
	if podSC == nil {
		podSC = &SecurityContext{}
	}
	for _, ct := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		sc := ct.SecurityContext
		if sc == nil {
			sc = &SecurityContext{}
		}
		where := "container " + ct.Name
		if !isTrue(sc.RunAsNonRoot) && !isTrue(podSC.RunAsNonRoot) {
			c.errorf("%s: want runAsNonRoot: true (container or pod)", where)
		}
		if u := firstInt(sc.RunAsUser, podSC.RunAsUser); u != nil && *u == 0 {
			c.errorf("%s: runAsUser 0", where)
		}
		if !isTrue(sc.ReadOnlyRootFilesystem) {
			c.errorf("%s: want readOnlyRootFilesystem: true", where)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			c.errorf("%s: want allowPrivilegeEscalation: false", where)
		}
		if isTrue(sc.Privileged) {
			c.errorf("%s: privileged", where)
		}
		if !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			c.errorf("%s: want capabilities drop [ALL] and none added, got drop %v add %v", where, sc.Capabilities.Drop, sc.Capabilities.Add)
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = podSC.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != "RuntimeDefault" {
			c.errorf("%s: want seccompProfile RuntimeDefault (container or pod)", where)
		}
	}

	env, set, err := c.environment(ctr, byKind["ConfigMap"])
	if err != nil {
		c.errorf("%w", err)
		return deployed{}, false
	}
	d := deployed{name: o.Name, dep: dep, env: env, set: set, pods: dep.Spec.Template.Metadata.Labels}
	metricsPort, err := portOf(env["METRICS_ADDR"])
	if err != nil {
		c.errorf("METRICS_ADDR %q: %w", env["METRICS_ADDR"], err)
		return d, true
	}
	portNames := map[string]int{}
	for _, p := range ctr.Ports {
		portNames[p.Name] = p.ContainerPort
	}
	c.networkPolicy(byKind["NetworkPolicy"], dep.Spec.Template.Metadata.Labels, metricsPort, portNames, env["KAFKA_BROKERS"])
	c.probes(ctr, env)
	c.probePaths(ctr, metricsPort, portNames)
	c.role(d)
	c.resources(dep, ctr, env)
	return d, true
}

func isTrue(b *bool) bool { return b != nil && *b }

func firstInt(vs ...*int) *int {
	for _, v := range vs {
		if v != nil {
			return v
		}
	}
	return nil
}

// environment is the container's effective configuration: the binary's
// defaults, overlaid with the ConfigMaps it loads and its env; and the
// variables those set.
func (c *checker) environment(ctr Container, cms []Object) (map[string]string, map[string]bool, error) {
	data := map[string]map[string]string{}
	for _, o := range cms {
		var cm struct {
			Data map[string]string `yaml:"data"`
		}
		if err := DecodeInto(o.Raw, &cm); err != nil {
			return nil, nil, fmt.Errorf("decode ConfigMap %s: %w", o.Name, err)
		}
		data[o.Name] = cm.Data
	}
	env, set := map[string]string{}, map[string]bool{}
	for k, v := range c.opts.ConfigDefaults {
		env[k] = v
	}
	for _, ef := range ctr.EnvFrom {
		if ef.ConfigMapRef != nil {
			for k, v := range data[ef.ConfigMapRef.Name] {
				if _, ok := c.opts.ConfigDefaults[k]; !ok && c.opts.ConfigDefaults != nil {
					c.errorf("ConfigMap %s sets %s, which the binary does not read", ef.ConfigMapRef.Name, k)
				}
				env[k], set[k] = v, true
			}
		}
	}
	for _, e := range ctr.Env {
		if _, ok := c.opts.ConfigDefaults[e.Name]; !ok && c.opts.ConfigDefaults != nil && !runtimeEnv[e.Name] {
			c.errorf("env sets %s, which the binary does not read", e.Name)
		}
		env[e.Name], set[e.Name] = e.Value, true
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			env[e.Name] = data[e.ValueFrom.ConfigMapKeyRef.Name][e.ValueFrom.ConfigMapKeyRef.Key]
		}
	}
	return env, set, nil
}

// runtimeEnv are variables the Go runtime reads, not the binary's
// configuration.
var runtimeEnv = map[string]bool{"GOMEMLIMIT": true, "GOGC": true, "GOMAXPROCS": true, "GODEBUG": true}

func portOf(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(p)
}

// networkPolicy: one policy selecting the pods, denying by default in both
// directions; ingress only to the metrics port, egress only to DNS and the
// brokers' ports.
func (c *checker) networkPolicy(nps []Object, podLabels map[string]string, metricsPort int, portNames map[string]int, brokers string) {
	var pol *networkPolicy
	for _, o := range nps {
		var np networkPolicy
		if err := DecodeInto(o.Raw, &np); err != nil {
			c.errorf("decode NetworkPolicy %s: %w", o.Name, err)
			return
		}
		sel := np.Spec.PodSelector.MatchLabels
		match := len(sel) > 0
		for k, v := range sel {
			match = match && podLabels[k] == v
		}
		if match {
			pol = &np
		}
	}
	if pol == nil {
		c.errorf("no NetworkPolicy selects the pods (labels %v)", podLabels)
		return
	}
	if !slices.Contains(pol.Spec.PolicyTypes, "Ingress") || !slices.Contains(pol.Spec.PolicyTypes, "Egress") {
		c.errorf("NetworkPolicy: policyTypes %v: want Ingress and Egress", pol.Spec.PolicyTypes)
	}
	portNum := func(p any) int {
		switch v := p.(type) {
		case int:
			return v
		case string:
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
			return portNames[v]
		}
		return 0
	}
	if len(pol.Spec.Ingress) == 0 {
		c.errorf("NetworkPolicy: no ingress rule lets the scraper reach the metrics port %d", metricsPort)
	}
	for _, r := range pol.Spec.Ingress {
		if len(r.Ports) == 0 {
			c.errorf("NetworkPolicy: an ingress rule without ports opens every port; want only %d", metricsPort)
		}
		for _, p := range r.Ports {
			if portNum(p.Port) != metricsPort {
				c.errorf("NetworkPolicy: ingress port %v is not the metrics port %d", p.Port, metricsPort)
			}
		}
	}
	egress := map[string]bool{}
	for _, r := range pol.Spec.Egress {
		if len(r.Ports) == 0 {
			c.errorf("NetworkPolicy: an egress rule without ports opens every port")
		}
		for _, p := range r.Ports {
			proto := p.Protocol
			if proto == "" {
				proto = "TCP"
			}
			egress[fmt.Sprintf("%s/%d", proto, portNum(p.Port))] = true
		}
	}
	for _, want := range []string{"UDP/53", "TCP/53"} {
		if !egress[want] {
			c.errorf("NetworkPolicy: egress lacks DNS (%s)", want)
		}
	}
	for _, b := range strings.Split(brokers, ",") {
		if strings.TrimSpace(b) == "" {
			continue
		}
		port, err := portOf(strings.TrimSpace(b))
		if err != nil {
			c.errorf("KAFKA_BROKERS %q: %w", b, err)
			continue
		}
		if !egress[fmt.Sprintf("TCP/%d", port)] {
			c.errorf("NetworkPolicy: egress lacks the broker port %d (KAFKA_BROKERS %s)", port, b)
		}
	}
}

// probes: liveness lets the stage's own recovery (PRODUCE_RECOVERY_TIMEOUT,
// after which it exits 1 by itself) run out with margin, so Kubernetes
// never kills a stage about to recover; readiness reacts sooner, so the pod
// leaves the Service before liveness acts.
func (c *checker) probes(ctr Container, env map[string]string) {
	recovery, err := time.ParseDuration(env["PRODUCE_RECOVERY_TIMEOUT"])
	if err != nil {
		c.errorf("PRODUCE_RECOVERY_TIMEOUT %q: %w", env["PRODUCE_RECOVERY_TIMEOUT"], err)
		return
	}
	margin := c.opts.ProbeMargin
	if margin == 0 {
		margin = max(recovery/4, 15*time.Second)
	}
	if ctr.LivenessProbe == nil || ctr.ReadinessProbe == nil {
		c.errorf("container %s: want a livenessProbe and a readinessProbe", ctr.Name)
		return
	}
	live, ready := ctr.LivenessProbe.window(), ctr.ReadinessProbe.window()
	if live < recovery+margin {
		c.errorf("livenessProbe gives up after %v (initialDelaySeconds + periodSeconds x failureThreshold): want at least PRODUCE_RECOVERY_TIMEOUT %v + %v margin", live, recovery, margin)
	}
	if ready >= live {
		c.errorf("readinessProbe acts after %v, not sooner than liveness (%v)", ready, live)
	}
}

// probePaths: liveness and startup ask /healthz, readiness /readyz, on
// the metrics port (by name or number).
func (c *checker) probePaths(ctr Container, metricsPort int, portNames map[string]int) {
	for _, p := range []struct {
		what, path string
		probe      *Probe
		optional   bool
	}{
		{"livenessProbe", "/healthz", ctr.LivenessProbe, false},
		{"readinessProbe", "/readyz", ctr.ReadinessProbe, false},
		{"startupProbe", "/healthz", ctr.StartupProbe, true},
	} {
		switch {
		case p.probe == nil && p.optional:
			continue
		case p.probe == nil || p.probe.HTTPGet == nil:
			c.errorf("container %s: want an httpGet %s on %s", ctr.Name, p.what, p.path)
			continue
		case p.probe.HTTPGet.Path != p.path:
			c.errorf("container %s: %s path %q, want %q", ctr.Name, p.what, p.probe.HTTPGet.Path, p.path)
		}
		port := 0
		switch v := p.probe.HTTPGet.Port.(type) {
		case int:
			port = v
		case string:
			port = portNames[v]
			if n, err := strconv.Atoi(v); err == nil {
				port = n
			}
		}
		if port != metricsPort {
			c.errorf("container %s: %s port %v is not the metrics port %d", ctr.Name, p.what, p.probe.HTTPGet.Port, metricsPort)
		}
	}
}

// The roles of REPARTITION_HOPS (internal/config).
const (
	hopsBoth  = "both"
	hopsRekey = "rekey"
	hopsDedup = "dedup"
)

// hopsOf is a Deployment's REPARTITION_HOPS role with its default; ""
// without REPARTITION_TOPIC (one hop).
func hopsOf(env map[string]string) string {
	if env["REPARTITION_TOPIC"] == "" {
		return ""
	}
	if h := env["REPARTITION_HOPS"]; h != "" {
		return h
	}
	return hopsBoth
}

// Hop2Only are the variables only hop 2 reads (the filters, the
// checkpoints, the output and its reader budget): a REPARTITION_HOPS=rekey
// pod is given none of them, so that its settings show it holds none of
// that.
var Hop2Only = []string{"OUTPUT_TOPIC", "DEAD_LETTER_TOPIC", "DEDUP_MODE", "DEDUP_WINDOW", "DEDUP_EXPECTED_KEYS",
	"DEDUP_FP_RATE", "DEDUP_RETRACT_HEADER", "DEDUP_MAX_CLOCK_SKEW", "FETCH_BUFFER_BYTES", "CHECKPOINT_STORE",
	"CHECKPOINT_TOPIC", "CHECKPOINT_DIR", "CHECKPOINT_INTERVAL", "CHECKPOINT_CHAIN_RATIO", "CHECKPOINT_KEEP", "CHECKPOINT_ON_DAMAGE"}

// role: REPARTITION_HOPS is valid as the binary reads it (one of the
// roles, only with REPARTITION_TOPIC), and a rekey pod sets none of
// Hop2Only.
func (c *checker) role(d deployed) {
	h := d.env["REPARTITION_HOPS"]
	switch {
	case h == "":
		return
	case h != hopsBoth && h != hopsRekey && h != hopsDedup:
		c.errorf("REPARTITION_HOPS %q: want both, rekey or dedup (the binary exits 2)", h)
	case d.env["REPARTITION_TOPIC"] == "":
		c.errorf("REPARTITION_HOPS %s without REPARTITION_TOPIC: the binary exits 2", h)
	case h == hopsRekey:
		for _, k := range Hop2Only {
			if d.set[k] {
				c.errorf("REPARTITION_HOPS=rekey pod is given %s, which only hop 2 reads", k)
			}
		}
	}
}

// hops: several Deployments are the hops deployed apart. Each runs one
// role, together they run both hops, reading and writing the same topics
// with the same group and key; no Deployment's selector takes another's
// pods, and each pod has exactly one PodDisruptionBudget.
func (c *checker) hops(all []deployed, pdbs []Object) {
	var budgets []map[string]string
	for _, o := range pdbs {
		sel, err := BudgetSelector(o)
		if err != nil {
			c.errorf("%w", err)
			return
		}
		budgets = append(budgets, sel)
	}
	for _, d := range all {
		if !Selects(d.dep.Spec.Selector.MatchLabels, d.pods) {
			c.errorf("Deployment %s: selector %v does not match its pods %v", d.name, d.dep.Spec.Selector.MatchLabels, d.pods)
		}
		n := 0
		for _, b := range budgets {
			if Selects(b, d.pods) {
				n++
			}
		}
		if len(budgets) > 0 && n != 1 {
			c.errorf("Deployment %s: %d PodDisruptionBudgets select its pods, want one (an eviction with several fails)", d.name, n)
		}
	}
	if len(all) < 2 {
		return
	}
	rekey, dedup := false, false
	for i, d := range all {
		switch hopsOf(d.env) {
		case hopsRekey:
			rekey = true
		case hopsDedup:
			dedup = true
		default:
			c.errorf("Deployment %s: REPARTITION_HOPS %q with REPARTITION_TOPIC %q: with several Deployments each runs one hop (rekey or dedup)",
				d.name, d.env["REPARTITION_HOPS"], d.env["REPARTITION_TOPIC"])
		}
		for _, o := range all[:i] {
			if Selects(d.dep.Spec.Selector.MatchLabels, o.pods) || Selects(o.dep.Spec.Selector.MatchLabels, d.pods) {
				c.errorf("Deployments %s and %s: a selector takes the other's pods", o.name, d.name)
			}
			// Hop 1's group is <GROUP_ID>-repartition and hop 2's GROUP_ID:
			// the same settings line the groups and topics up.
			for _, k := range []string{"KAFKA_BROKERS", "GROUP_ID", "INPUT_TOPIC", "REPARTITION_TOPIC", "REPARTITION_PARTITIONS", "DEDUP_KEY"} {
				if d.env[k] != o.env[k] {
					c.errorf("Deployments %s and %s: %s %q and %q: the hops must share it", o.name, d.name, k, o.env[k], d.env[k])
				}
			}
		}
	}
	if !rekey || !dedup {
		c.errorf("the Deployments run rekey %v, dedup %v: want both hops", rekey, dedup)
	}
}

// BudgetSelector is a PodDisruptionBudget's spec.selector.matchLabels.
func BudgetSelector(o Object) (map[string]string, error) {
	var pdb struct {
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
		} `yaml:"spec"`
	}
	if err := DecodeInto(o.Raw, &pdb); err != nil {
		return nil, fmt.Errorf("decode PodDisruptionBudget %s: %w", o.Name, err)
	}
	return pdb.Spec.Selector.MatchLabels, nil
}

// Selects reports whether a non-empty selector matches labels.
func Selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// RecordBytes is the mean input record the hop 1 reader's memory is
// checked for when a Deployment does not say (annotation
// dedup/record-bytes): `dedup size --record-bytes`'s default.
const RecordBytes = 500

// resources: the memory request, limit and GOMEMLIMIT follow the model
// `dedup size` prints (sizing with rotation's pair size) for the
// Deployment's role (`dedup size --repartition --hops`), for the partition
// count the role scales with: the dedup/input-partitions annotation, or
// for REPARTITION_HOPS=dedup dedup/repartition-partitions.
func (c *checker) resources(dep Deployment, ctr Container, env map[string]string) {
	hops := hopsOf(env)
	annotation := "dedup/input-partitions"
	if hops == hopsDedup {
		annotation = "dedup/repartition-partitions"
	}
	partitions, err := strconv.Atoi(dep.Metadata.Annotations[annotation])
	if err != nil {
		c.errorf("Deployment annotation %s (the partition count the resources are sized for): %w", annotation, err)
		return
	}
	replicas := 1
	if dep.Spec.Replicas != nil {
		replicas = *dep.Spec.Replicas
	}
	request, err1 := ParseQuantity(ctr.Resources.Requests["memory"])
	limit, err2 := ParseQuantity(ctr.Resources.Limits["memory"])
	batch, err3 := ParseQuantity(env["PRODUCE_BATCH_BYTES"])
	fetchMax, err4 := ParseQuantity(env["FETCH_MAX_BYTES"])
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		c.errorf("resources: %w", err)
		return
	}
	d := sizing.Deployment{Partitions: partitions, Replicas: replicas, ProduceBatchBytes: batch, Hops: hops}
	if hops == hopsBoth || hops == hopsRekey {
		recordBytes := int64(RecordBytes)
		if v, ok := dep.Metadata.Annotations["dedup/record-bytes"]; ok {
			if recordBytes, err = strconv.ParseInt(v, 10, 64); err != nil || recordBytes < 1 {
				c.errorf("Deployment annotation dedup/record-bytes %q: want the mean input record's bytes", v)
				return
			}
		}
		// As the stage bounds hop 1's fetches (internal/service).
		d.Hop1PartitionBytes = sizing.Repartition{RecordBytes: recordBytes, KeyBytes: 16, InputTopic: env["INPUT_TOPIC"],
			FetchBytes: min(fetchMax, sizing.Hop1FetchBytes), BatchBytes: batch}.Hop1PartitionBytes()
	}
	if hops != hopsRekey {
		pair, fetch, ok := c.filters(env)
		if !ok {
			return
		}
		d.PairBytes, d.FetchBufferBytes = pair, fetch
	}
	c.memory(d.Resources(), ctr, env, request, limit)
}

// filters is one partition's pair and FETCH_BUFFER_BYTES, from the
// environment.
func (c *checker) filters(env map[string]string) (pairBytes, fetchBuffer int64, ok bool) {
	keys, err := strconv.ParseUint(env["DEDUP_EXPECTED_KEYS"], 10, 64)
	if err != nil {
		c.errorf("DEDUP_EXPECTED_KEYS: %w", err)
		return 0, 0, false
	}
	fp, err := strconv.ParseFloat(env["DEDUP_FP_RATE"], 64)
	if err != nil {
		c.errorf("DEDUP_FP_RATE: %w", err)
		return 0, 0, false
	}
	mode, err := rotation.ParseMode(env["DEDUP_MODE"])
	if err != nil {
		c.errorf("DEDUP_MODE: %w", err)
		return 0, 0, false
	}
	pair, err := rotation.New(rotation.Options{ExpectedKeys: keys, FPRate: fp, Window: time.Hour, Mode: mode})
	if err != nil {
		c.errorf("size the filters: %w", err)
		return 0, 0, false
	}
	fetch, err := ParseQuantity(env["FETCH_BUFFER_BYTES"])
	if err != nil {
		c.errorf("resources: %w", err)
		return 0, 0, false
	}
	return int64(pair.SizeBytes()), fetch, true
}

// memory holds the container's request, limit and GOMEMLIMIT to res.
func (c *checker) memory(res sizing.Resources, ctr Container, env map[string]string, request, limit int64) {
	if request < res.Request {
		c.errorf("memory request %s is below `dedup size`'s %s", ctr.Resources.Requests["memory"], sizing.Quantity(res.Request))
	}
	if limit < res.Limit {
		c.errorf("memory limit %s is below `dedup size`'s %s", ctr.Resources.Limits["memory"], sizing.Quantity(res.Limit))
	}
	if limit > 4*res.Limit {
		c.errorf("memory limit %s is far above `dedup size`'s %s: resize it", ctr.Resources.Limits["memory"], sizing.Quantity(res.Limit))
	}
	gml, ok := env["GOMEMLIMIT"]
	if !ok {
		c.errorf("the container sets no GOMEMLIMIT (`dedup size` prints %s)", sizing.GoMemLimit(res.GoMemLimit))
		return
	}
	v, err := ParseQuantity(gml)
	if err != nil {
		c.errorf("GOMEMLIMIT: %w", err)
	} else if v >= limit || v < res.GoMemLimit*9/10 {
		c.errorf("GOMEMLIMIT %s: want below the memory limit %s and near `dedup size`'s %s", gml, ctr.Resources.Limits["memory"], sizing.GoMemLimit(res.GoMemLimit))
	}
}

// ParseQuantity reads the memory quantities the manifests and the binary's
// byte settings use: plain bytes, Ki/Mi/Gi, KiB/MiB/GiB, k/M/G.
func ParseQuantity(q string) (int64, error) {
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}} {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil {
				return 0, fmt.Errorf("parse quantity %q: %w", q, err)
			}
			return int64(v * u.mult), nil
		}
	}
	v, err := strconv.ParseInt(q, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse quantity %q: %w", q, err)
	}
	return v, nil
}
