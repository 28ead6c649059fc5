// Package deploy_test proves that what deploy/ and docker-compose.yml ship
// fits the binary: the configuration they set is configuration the binary
// reads, the ports and images they name exist, promtool accepts the
// Prometheus files, and (in prometheus_test.go) every dashboard query and
// alert expression parses in a real Prometheus and names only series the
// running binary exposes.
package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"dedup/deploy/k8scheck"
	"dedup/internal/testkit"
	"dedup/rotation"
	"dedup/sizing"
)

// root is the repository root (tests run in deploy/).
const root = ".."

func path(parts ...string) string { return filepath.Join(append([]string{root}, parts...)...) }

// runtimeEnv are variables the manifests may set that the Go runtime reads,
// not the binary's configuration.
var runtimeEnv = map[string]bool{"GOMEMLIMIT": true, "GOMAXPROCS": true, "GOGC": true}

// dedupImage is the image name docker-compose.yml gives the build of
// deploy/Dockerfile, and the name the Kubernetes base refers to.
const dedupImage = "dedup"

// ---------------------------------------------------------------------------
// The configuration struct, read from source.

// configVars are the `env` tags of the Config struct of
// internal/config/config.go (with their envDefault), in declaration order.
func configVars(t *testing.T) []k8scheck.ConfigVar {
	t.Helper()
	vars, err := k8scheck.ConfigVars(path("internal", "config", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	return vars
}

func configVarSet(t *testing.T) map[string]k8scheck.ConfigVar {
	set := make(map[string]k8scheck.ConfigVar)
	for _, v := range configVars(t) {
		set[v.Name] = v
	}
	return set
}

// cmdStringLiterals returns every string literal in cmd/dedup's non-test
// sources: subcommand and flag names used by the manifests must be among them.
func cmdStringLiterals(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(path("cmd", "dedup", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	lits := make(map[string]bool)
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", file, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if bl, ok := n.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				if s, err := strconv.Unquote(bl.Value); err == nil {
					lits[s] = true
				}
			}
			return true
		})
	}
	return lits
}

// checkArgs reports arguments of the binary that cmd/dedup does not know:
// the subcommand must be a string literal there, and so must each flag name.
func checkArgs(t *testing.T, where string, args []string, lits map[string]bool) {
	t.Helper()
	for i, a := range args {
		switch {
		case i == 0 && !strings.HasPrefix(a, "-"):
			if !lits[a] {
				t.Errorf("%s: subcommand %q is not handled by cmd/dedup", where, a)
			}
		case strings.HasPrefix(a, "-"):
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !lits[name] {
				t.Errorf("%s: flag %q is not defined in cmd/dedup", where, a)
			}
		}
	}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("split %q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("port of %q: %v", addr, err)
	}
	return n
}

// ---------------------------------------------------------------------------
// The Dockerfile.

type dockerfile struct {
	Stages      []string // FROM lines
	User        string   // last USER of the final stage
	Env         map[string]string
	Expose      []int
	Healthcheck []string // exec form
	Entrypoint  []string
	CopiedTo    []string          // destinations of COPY in the final stage
	Args        []string          // ARG names of the final stage
	Labels      map[string]string // LABELs of the final stage, unquoted
	Runs        []string          // RUN commands of every stage
}

// dockerLabel is one key=value of a LABEL line, the value maybe quoted.
var dockerLabel = regexp.MustCompile(`([^\s=]+)=("[^"]*"|\S+)`)

func parseDockerfile(t *testing.T) dockerfile {
	t.Helper()
	raw, err := os.ReadFile(path("deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Join continuation lines, drop comments.
	var lines []string
	var cur strings.Builder
	for _, l := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "#") && cur.Len() == 0 {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		if s := strings.TrimSpace(cur.String()); s != "" {
			lines = append(lines, s)
		}
		cur.Reset()
	}
	d := dockerfile{Env: map[string]string{}, Labels: map[string]string{}}
	jsonArray := func(s string) []string {
		var a []string
		if err := json.Unmarshal([]byte(s), &a); err != nil {
			t.Fatalf("Dockerfile: %q is not in exec (JSON array) form: %v", s, err)
		}
		return a
	}
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			d.Stages = append(d.Stages, rest)
			d.Env, d.Labels = map[string]string{}, map[string]string{}
			d.CopiedTo, d.Args = nil, nil
			d.User, d.Expose, d.Healthcheck, d.Entrypoint = "", nil, nil, nil
		case "USER":
			d.User = rest
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("Dockerfile: ENV %q: use KEY=value form", rest)
				}
				d.Env[k] = v
			}
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				p, _, _ = strings.Cut(p, "/")
				n, err := strconv.Atoi(p)
				if err != nil {
					t.Fatalf("Dockerfile: EXPOSE %q: %v", rest, err)
				}
				d.Expose = append(d.Expose, n)
			}
		case "HEALTHCHECK":
			_, cmd, ok := strings.Cut(rest, "CMD ")
			if !ok {
				t.Fatalf("Dockerfile: HEALTHCHECK without CMD: %q", rest)
			}
			d.Healthcheck = jsonArray(strings.TrimSpace(cmd))
		case "ENTRYPOINT":
			d.Entrypoint = jsonArray(rest)
		case "COPY":
			f := strings.Fields(rest)
			d.CopiedTo = append(d.CopiedTo, f[len(f)-1])
		case "ARG":
			name, _, _ := strings.Cut(rest, "=")
			d.Args = append(d.Args, name)
		case "LABEL":
			for _, m := range dockerLabel.FindAllStringSubmatch(rest, -1) {
				d.Labels[m[1]] = strings.Trim(m[2], `"`)
			}
		case "RUN":
			d.Runs = append(d.Runs, rest)
		}
	}
	return d
}

func TestDockerfile(t *testing.T) {
	d := parseDockerfile(t)
	vars := configVarSet(t)

	if len(d.Stages) < 2 {
		t.Errorf("want a multi-stage build, got stages %q", d.Stages)
	}
	final := d.Stages[len(d.Stages)-1]
	if !strings.Contains(final, "distroless/static") && !strings.HasPrefix(final, "scratch") {
		t.Errorf("final stage %q: want a static minimal image (distroless/static or scratch)", final)
	}
	user, _, _ := strings.Cut(d.User, ":")
	if user == "" || user == "root" || user == "0" {
		t.Errorf("final stage runs as %q: want a non-root USER", d.User)
	}
	if len(d.Entrypoint) == 0 || !slices.Contains(d.CopiedTo, d.Entrypoint[0]) {
		t.Errorf("ENTRYPOINT %q is not a file the final stage copies in (%q)", d.Entrypoint, d.CopiedTo)
	}
	for k := range d.Env {
		if _, ok := vars[k]; !ok && !runtimeEnv[k] {
			t.Errorf("Dockerfile sets ENV %s, which internal/config's Config does not read", k)
		}
	}
	metricsAddr := d.Env["METRICS_ADDR"]
	if metricsAddr == "" {
		metricsAddr = vars["METRICS_ADDR"].Default
	}
	if port := portOf(t, metricsAddr); !slices.Contains(d.Expose, port) {
		t.Errorf("METRICS_ADDR %q: port not in EXPOSE %v", metricsAddr, d.Expose)
	}
	if len(d.Healthcheck) == 0 {
		t.Fatalf("no HEALTHCHECK in the final stage")
	}
	if d.Healthcheck[0] != d.Entrypoint[0] {
		t.Errorf("HEALTHCHECK %q: want the binary itself (%s): the runtime image has no shell or curl", d.Healthcheck, d.Entrypoint[0])
	}
	checkArgs(t, "Dockerfile HEALTHCHECK", d.Healthcheck[1:], cmdStringLiterals(t))
}

// ---------------------------------------------------------------------------
// docker-compose.yml.

type composeService struct {
	Image       string            `yaml:"image"`
	Build       *composeBuild     `yaml:"build"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

type composeBuild struct {
	Context    string            `yaml:"context"`
	Dockerfile string            `yaml:"dockerfile"`
	Args       map[string]string `yaml:"args"`
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile(path("docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// depends_on comes in a list form too; normalise it before the typed decode.
	var generic map[string]any
	if err := yaml.Unmarshal(raw, &generic); err != nil {
		t.Fatalf("docker-compose.yml is not YAML: %v", err)
	}
	services, _ := generic["services"].(map[string]any)
	for _, s := range services {
		svc, _ := s.(map[string]any)
		if list, ok := svc["depends_on"].([]any); ok {
			m := map[string]any{}
			for _, name := range list {
				m[fmt.Sprint(name)] = map[string]any{"condition": "service_started"}
			}
			svc["depends_on"] = m
		}
	}
	norm, err := yaml.Marshal(generic)
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := yaml.NewDecoder(bytes.NewReader(norm))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		// Unknown keys are fine for compose; decode again leniently.
		if err := yaml.Unmarshal(norm, &c); err != nil {
			t.Fatalf("decode docker-compose.yml: %v", err)
		}
	}
	if len(c.Services) == 0 {
		t.Fatalf("docker-compose.yml has no services")
	}
	return c
}

// isDedup reports whether a compose service runs the image of deploy/Dockerfile.
func (s composeService) isDedup() bool {
	if s.Build != nil {
		return filepath.Clean(filepath.Join(s.Build.Context, s.Build.Dockerfile)) == filepath.Join("deploy", "Dockerfile")
	}
	name, _, _ := strings.Cut(s.Image, ":")
	return name == dedupImage
}

func TestComposeFitsBinary(t *testing.T) {
	c := loadCompose(t)
	vars := configVarSet(t)
	lits := cmdStringLiterals(t)
	d := parseDockerfile(t)

	var dedupServices []string
	for name, s := range c.Services {
		for dep := range s.DependsOn {
			if _, ok := c.Services[dep]; !ok {
				t.Errorf("service %s depends on %q, which is not a service", name, dep)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(path(src)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			}
		}
		if !s.isDedup() {
			if s.Image == "" || strings.HasSuffix(s.Image, ":latest") || !strings.Contains(s.Image, ":") {
				t.Errorf("service %s: image %q: pin a version tag", name, s.Image)
			}
			continue
		}
		dedupServices = append(dedupServices, name)
		if s.Build != nil {
			if _, err := os.Stat(path(s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("service %s builds %s: %v", name, s.Build.Dockerfile, err)
			}
		}
		if n, _, _ := strings.Cut(s.Image, ":"); n != dedupImage {
			t.Errorf("service %s: image %q: want %s:<tag> (the Kubernetes base refers to %q)", name, s.Image, dedupImage, dedupImage)
		}
		for k := range s.Environment {
			if _, ok := vars[k]; !ok && !runtimeEnv[k] {
				t.Errorf("service %s sets %s, which internal/config's Config does not read", name, k)
			}
		}
		checkArgs(t, "service "+name+" command", s.Command, lits)
		metricsAddr := s.Environment["METRICS_ADDR"]
		if metricsAddr == "" {
			metricsAddr = d.Env["METRICS_ADDR"]
		}
		for _, p := range s.Ports {
			f := strings.Split(p, ":")
			container, err := strconv.Atoi(strings.Split(f[len(f)-1], "/")[0])
			if err != nil {
				t.Errorf("service %s: port %q: %v", name, p, err)
				continue
			}
			if !slices.Contains(d.Expose, container) {
				t.Errorf("service %s publishes container port %d, which the Dockerfile does not EXPOSE (%v)", name, container, d.Expose)
			}
			if container != portOf(t, metricsAddr) {
				t.Errorf("service %s publishes %d but METRICS_ADDR is %q", name, container, metricsAddr)
			}
		}
		if s.StopGracePeriod != "" {
			grace, err := time.ParseDuration(s.StopGracePeriod)
			if err != nil {
				t.Errorf("service %s: stop_grace_period %q: %v", name, s.StopGracePeriod, err)
			}
			shutdown := s.Environment["SHUTDOWN_TIMEOUT"]
			if shutdown == "" {
				shutdown = vars["SHUTDOWN_TIMEOUT"].Default
			}
			if st, err := time.ParseDuration(shutdown); err == nil && grace <= st {
				t.Errorf("service %s: stop_grace_period %s must exceed SHUTDOWN_TIMEOUT %s (final checkpoint)", name, grace, st)
			}
		}
	}
	sort.Strings(dedupServices)
	var processor, generator string
	for _, name := range dedupServices {
		s := c.Services[name]
		if len(s.Command) > 0 && s.Command[0] == "demo" {
			generator = name
			if !slices.Contains(s.Command, "--generate-only") {
				t.Errorf("service %s runs the demo without --generate-only: it would run a second stage", name)
			}
		} else {
			processor = name
		}
		if s.Environment["KAFKA_BROKERS"] == "" {
			t.Errorf("service %s: KAFKA_BROKERS empty: it would start its own embedded broker instead of using Kafka", name)
		}
	}
	if processor == "" || generator == "" {
		t.Fatalf("want a processor and a `demo --generate-only` generator built from deploy/Dockerfile, got %v", dedupServices)
	}
	if in, gen := c.Services[processor].Environment["INPUT_TOPIC"], c.Services[generator].Environment["INPUT_TOPIC"]; in != gen {
		t.Errorf("generator writes INPUT_TOPIC %q, processor reads %q", gen, in)
	}

	// Kafka: KRaft mode of the official image, and the topics created at start.
	kafka, ok := c.Services["kafka"]
	if !ok || !strings.HasPrefix(kafka.Image, "apache/kafka:") {
		t.Fatalf("want a service kafka from the official apache/kafka image")
	}
	if !strings.Contains(kafka.Environment["KAFKA_PROCESS_ROLES"], "controller") {
		t.Errorf("kafka: KAFKA_PROCESS_ROLES %q: want KRaft (broker,controller)", kafka.Environment["KAFKA_PROCESS_ROLES"])
	}
	host := strings.Split(c.Services[processor].Environment["KAFKA_BROKERS"], ":")[0]
	if _, ok := c.Services[host]; !ok {
		t.Errorf("KAFKA_BROKERS names host %q, which is not a service", host)
	}
	if !strings.Contains(kafka.Environment["KAFKA_ADVERTISED_LISTENERS"], c.Services[processor].Environment["KAFKA_BROKERS"]) {
		t.Errorf("KAFKA_BROKERS %q is not among kafka's advertised listeners %q", c.Services[processor].Environment["KAFKA_BROKERS"], kafka.Environment["KAFKA_ADVERTISED_LISTENERS"])
	}
	var initCmd string
	for name, s := range c.Services {
		if strings.HasPrefix(s.Image, "apache/kafka:") && name != "kafka" {
			initCmd = strings.Join(s.Command, " ")
			if dep, ok := c.Services[processor].DependsOn[name]; !ok || dep.Condition != "service_completed_successfully" {
				t.Errorf("processor must wait for %s (service_completed_successfully)", name)
			}
		}
	}
	for _, topic := range []string{c.Services[processor].Environment["INPUT_TOPIC"], c.Services[processor].Environment["OUTPUT_TOPIC"]} {
		if !strings.Contains(initCmd, "--topic "+topic+" ") {
			t.Errorf("no service creates topic %q at start", topic)
		}
	}

	// Prometheus scrapes the processor service on its metrics port with the
	// shipped config, and Grafana finds Prometheus.
	prom := loadYAML(t, path("deploy", "prometheus", "prometheus.yml"))
	var targets []string
	for _, sc := range prom["scrape_configs"].([]any) {
		sc := sc.(map[string]any)
		if sc["job_name"] != "dedup" {
			continue
		}
		for _, st := range sc["static_configs"].([]any) {
			for _, tg := range st.(map[string]any)["targets"].([]any) {
				targets = append(targets, tg.(string))
			}
		}
	}
	want := net.JoinHostPort(processor, strconv.Itoa(portOf(t, c.Services[processor].Environment["METRICS_ADDR"])))
	if !slices.Contains(targets, want) {
		t.Errorf("prometheus.yml job dedup targets %v, want %s", targets, want)
	}
	ds := loadYAML(t, path("deploy", "grafana", "provisioning", "datasources", "prometheus.yml"))
	url := ds["datasources"].([]any)[0].(map[string]any)["url"].(string)
	if !strings.Contains(url, "//prometheus:9090") || c.Services["prometheus"].Image == "" {
		t.Errorf("Grafana datasource url %q: want the compose service prometheus:9090", url)
	}
	if !slices.Contains(c.Services["prometheus"].Ports, "9090:9090") || !slices.Contains(c.Services["grafana"].Ports, "3000:3000") {
		t.Errorf("Prometheus and Grafana must publish 9090 and 3000 (the README's URLs)")
	}
	dp := loadYAML(t, path("deploy", "grafana", "provisioning", "dashboards", "dedup.yml"))
	dashPath := dp["providers"].([]any)[0].(map[string]any)["options"].(map[string]any)["path"].(string)
	mounted := false
	for _, v := range c.Services["grafana"].Volumes {
		f := strings.Split(v, ":")
		if len(f) >= 2 && f[1] == dashPath && filepath.Clean(f[0]) == filepath.Join("deploy", "grafana", "dashboards") {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("grafana does not mount deploy/grafana/dashboards at the provisioned path %s", dashPath)
	}
}

func loadYAML(t *testing.T, file string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s is not YAML: %v", file, err)
	}
	return m
}

// ---------------------------------------------------------------------------
// Kubernetes.

// loadManifests decodes every document of deploy/kubernetes; each must
// name its kind.
func loadManifests(t *testing.T) []k8scheck.Object {
	t.Helper()
	objs, err := k8scheck.DecodeFiles(path("deploy", "kubernetes", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Kind == "" {
			t.Errorf("%s: document without kind", o.Source)
		}
	}
	return objs
}

// decodeInto re-decodes a generic YAML value into a typed one.
func decodeInto(t *testing.T, v any, out any) {
	t.Helper()
	if err := k8scheck.DecodeInto(v, out); err != nil {
		t.Fatalf("decode %T: %v", out, err)
	}
}

// parseQuantity reads the Kubernetes memory quantities the manifests use.
func parseQuantity(t *testing.T, q string) int64 {
	t.Helper()
	units := []struct {
		suffix string
		mult   int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}}
	slices.SortFunc(units, func(a, b struct {
		suffix string
		mult   int64
	}) int {
		return len(b.suffix) - len(a.suffix)
	})
	for _, u := range units {
		if n, ok := strings.CutSuffix(q, u.suffix); ok {
			v, err := strconv.ParseFloat(n, 64)
			if err != nil {
				t.Fatalf("quantity %q: %v", q, err)
			}
			return int64(v * float64(u.mult))
		}
	}
	v, err := strconv.ParseInt(q, 10, 64)
	if err != nil {
		t.Fatalf("quantity %q: %v", q, err)
	}
	return v
}

func TestKubernetesFitsBinary(t *testing.T) {
	objs := loadManifests(t)
	vars := configVarSet(t)
	d := parseDockerfile(t)
	byKind := map[string][]k8scheck.Object{}
	for _, o := range objs {
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	for _, kind := range []string{"Deployment", "ConfigMap", "Service", "PodDisruptionBudget", "PodMonitor", "PrometheusRule", "Kustomization", "Secret", "ServiceAccount", "NetworkPolicy"} {
		if len(byKind[kind]) == 0 {
			t.Errorf("deploy/kubernetes has no %s", kind)
		}
	}
	if len(byKind["Deployment"]) != 1 {
		t.Fatalf("want one Deployment, got %d", len(byKind["Deployment"]))
	}
	var dep k8scheck.Deployment
	decodeInto(t, byKind["Deployment"][0].Raw, &dep)
	podLabels := dep.Spec.Template.Metadata.Labels
	if !k8scheck.Selects(dep.Spec.Selector.MatchLabels, podLabels) {
		t.Errorf("Deployment selector %v does not match its pod labels %v", dep.Spec.Selector.MatchLabels, podLabels)
	}
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(dep.Spec.Template.Spec.Containers))
	}
	ctr := dep.Spec.Template.Spec.Containers[0]
	if name, _, _ := strings.Cut(ctr.Image, ":"); name != dedupImage {
		t.Errorf("container image %q: want %s (the image built from deploy/Dockerfile; kustomize images: rewrites it)", ctr.Image, dedupImage)
	}

	// Environment: from the ConfigMap(s) and Secret(s) it references, and env.
	env := map[string]string{}
	configMaps := map[string]map[string]string{}
	for _, o := range byKind["ConfigMap"] {
		var cm struct {
			Data map[string]string `yaml:"data"`
		}
		decodeInto(t, o.Raw, &cm)
		configMaps[o.Name] = cm.Data
	}
	secrets := map[string]map[string]string{}
	for _, o := range byKind["Secret"] {
		var s struct {
			StringData map[string]string `yaml:"stringData"`
			Data       map[string]string `yaml:"data"`
		}
		decodeInto(t, o.Raw, &s)
		secrets[o.Name] = map[string]string{}
		for k, v := range s.StringData {
			secrets[o.Name][k] = v
		}
		for k, v := range s.Data {
			secrets[o.Name][k] = v
		}
	}
	for _, ef := range ctr.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			data, ok := configMaps[ef.ConfigMapRef.Name]
			if !ok {
				t.Errorf("envFrom ConfigMap %q is not in deploy/kubernetes", ef.ConfigMapRef.Name)
			}
			for k, v := range data {
				env[k] = v
			}
		case ef.SecretRef != nil:
			data, ok := secrets[ef.SecretRef.Name]
			if !ok {
				t.Errorf("envFrom Secret %q has no example in deploy/kubernetes", ef.SecretRef.Name)
			}
			if !ef.SecretRef.Optional {
				t.Errorf("envFrom Secret %q must be optional: the base does not create it", ef.SecretRef.Name)
			}
			for k := range data {
				env[k] = "(secret)"
			}
		}
	}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			ref := e.ValueFrom.ConfigMapKeyRef
			v, ok := configMaps[ref.Name][ref.Key]
			if !ok {
				t.Errorf("env %s: ConfigMap %s has no key %s", e.Name, ref.Name, ref.Key)
			}
			env[e.Name] = v
		}
	}

	// No toy broker by accident: KAFKA_BROKERS is a required key (the pod
	// does not start without it), and the binary refuses an empty one.
	required := false
	for _, e := range ctr.Env {
		if e.Name == "KAFKA_BROKERS" && e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
			opt := e.ValueFrom.ConfigMapKeyRef.Optional
			required = opt == nil || !*opt
		}
	}
	if !required {
		t.Error("the Deployment must take KAFKA_BROKERS from a ConfigMap key that is not optional, so a pod without it does not start")
	}
	if strings.TrimSpace(env["KAFKA_BROKERS"]) == "" {
		t.Error("the ConfigMap's KAFKA_BROKERS is empty")
	}
	if v := env["DEDUP_REQUIRE_BROKERS"]; v == "" && d.Env["DEDUP_REQUIRE_BROKERS"] != "true" || v != "" && v != "true" {
		t.Errorf("DEDUP_REQUIRE_BROKERS: want true (from the image or the ConfigMap), got %q in the manifests, %q in the image", v, d.Env["DEDUP_REQUIRE_BROKERS"])
	}
	for k := range env {
		if _, ok := vars[k]; !ok && !runtimeEnv[k] {
			t.Errorf("the Deployment's environment sets %s, which internal/config's Config does not read", k)
		}
	}
	get := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return vars[k].Default
	}

	// Ports and probes.
	metricsPort := portOf(t, get("METRICS_ADDR"))
	if !slices.Contains(d.Expose, metricsPort) {
		t.Errorf("METRICS_ADDR port %d is not EXPOSEd by the Dockerfile (%v)", metricsPort, d.Expose)
	}
	portNames := map[string]int{}
	for _, p := range ctr.Ports {
		portNames[p.Name] = p.ContainerPort
		if p.ContainerPort != metricsPort {
			t.Errorf("containerPort %d (%s) is not METRICS_ADDR's port %d", p.ContainerPort, p.Name, metricsPort)
		}
	}
	probePort := func(what string, p *k8scheck.Probe, wantPath string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe on %s", what, wantPath)
			return
		}
		if p.HTTPGet.Path != wantPath {
			t.Errorf("%s path %q, want %q", what, p.HTTPGet.Path, wantPath)
		}
		switch port := p.HTTPGet.Port.(type) {
		case string:
			if portNames[port] != metricsPort {
				t.Errorf("%s port %q is not the metrics port", what, port)
			}
		case int:
			if port != metricsPort {
				t.Errorf("%s port %d is not the metrics port %d", what, port, metricsPort)
			}
		default:
			t.Errorf("%s port %v", what, port)
		}
	}
	probePort("livenessProbe", ctr.LivenessProbe, "/healthz")
	probePort("readinessProbe", ctr.ReadinessProbe, "/readyz")
	if ctr.StartupProbe != nil {
		probePort("startupProbe", ctr.StartupProbe, "/healthz")
	}

	// Shutdown: the grace period covers SHUTDOWN_TIMEOUT and the final checkpoint.
	shutdown, err := time.ParseDuration(get("SHUTDOWN_TIMEOUT"))
	if err != nil {
		t.Fatalf("SHUTDOWN_TIMEOUT: %v", err)
	}
	grace := time.Duration(dep.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	if grace < shutdown+15*time.Second {
		t.Errorf("terminationGracePeriodSeconds %s: want at least SHUTDOWN_TIMEOUT (%s) + 15s for the final checkpoint", grace, shutdown)
	}
	readOnly := ctr.SecurityContext != nil && ctr.SecurityContext.ReadOnlyRootFilesystem != nil && *ctr.SecurityContext.ReadOnlyRootFilesystem
	if !slices.ContainsFunc(ctr.VolumeMounts, func(m k8scheck.VolumeMount) bool {
		return m.MountPath == get("DATA_DIR")
	}) && readOnly {
		t.Errorf("DATA_DIR %s is not a mounted volume, but the root filesystem is read-only", get("DATA_DIR"))
	}

	// Resources derive from the filter-size formula: see the comment at the
	// top of deployment.yaml and the README's sizing section.
	partitions, err := strconv.Atoi(dep.Metadata.Annotations["dedup/input-partitions"])
	if err != nil {
		t.Fatalf("Deployment annotation dedup/input-partitions (the partition count the resources are sized for): %v", err)
	}
	replicas := 0 // none set: refused below
	if dep.Spec.Replicas != nil {
		replicas = *dep.Spec.Replicas
	}
	if replicas < 1 || replicas > partitions {
		t.Errorf("replicas %d: want 1..%d (the input partitions)", replicas, partitions)
	}
	sizeBytes := filterBytes(t, get("DEDUP_EXPECTED_KEYS"), get("DEDUP_FP_RATE"), get("DEDUP_MODE"))
	perPod := (partitions + replicas - 1) / replicas
	perPodOneDown := perPod
	if replicas > 1 {
		perPodOneDown = (partitions + replicas - 2) / (replicas - 1)
	}
	// The memory model is the one `dedup size` prints (sizing).
	res := sizing.Deployment{
		PairBytes:         int64(sizeBytes),
		Partitions:        partitions,
		Replicas:          replicas,
		FetchBufferBytes:  parseQuantity(t, get("FETCH_BUFFER_BYTES")),
		ProduceBatchBytes: parseQuantity(t, get("PRODUCE_BATCH_BYTES")),
	}.Resources()
	perPod, perPodOneDown, wantRequest, wantLimit := res.PartitionsPerInstance, res.PartitionsPerInstanceOneDown, res.Request, res.Limit
	request := parseQuantity(t, ctr.Resources.Requests["memory"])
	limit := parseQuantity(t, ctr.Resources.Limits["memory"])
	t.Logf("pair %d bytes; %d partitions/pod (%d with one pod down): memory request >= %d MiB, limit >= %d MiB; manifest has %d MiB / %d MiB",
		sizeBytes, perPod, perPodOneDown, wantRequest>>20, wantLimit>>20, request>>20, limit>>20)
	if request < wantRequest {
		t.Errorf("memory request %s is below the formula's %d MiB", ctr.Resources.Requests["memory"], wantRequest>>20)
	}
	if limit < wantLimit {
		t.Errorf("memory limit %s is below the formula's %d MiB", ctr.Resources.Limits["memory"], wantLimit>>20)
	}
	if limit > 4*wantLimit {
		t.Errorf("memory limit %s is far above the formula's %d MiB: resize it", ctr.Resources.Limits["memory"], wantLimit>>20)
	}
	if gml, ok := env["GOMEMLIMIT"]; !ok {
		t.Error("the Deployment sets no GOMEMLIMIT")
	} else if v := parseQuantity(t, gml); v >= limit || v < res.GoMemLimit*9/10 {
		t.Errorf("GOMEMLIMIT %s: want below the memory limit %s and near the model's %s", gml, ctr.Resources.Limits["memory"], sizing.GoMemLimit(res.GoMemLimit))
	}

	// Service, PodDisruptionBudget and PodMonitor select the pods and name the port.
	for _, o := range byKind["Service"] {
		var svc struct {
			Spec struct {
				Selector map[string]string `yaml:"selector"`
				Ports    []struct {
					Port       int `yaml:"port"`
					TargetPort any `yaml:"targetPort"`
				} `yaml:"ports"`
			} `yaml:"spec"`
		}
		decodeInto(t, o.Raw, &svc)
		if !k8scheck.Selects(svc.Spec.Selector, podLabels) {
			t.Errorf("Service %s selector %v does not match the pods %v", o.Name, svc.Spec.Selector, podLabels)
		}
		for _, p := range svc.Spec.Ports {
			if name, ok := p.TargetPort.(string); ok && portNames[name] == 0 {
				t.Errorf("Service %s targetPort %q is not a container port", o.Name, name)
			}
		}
	}
	for _, o := range byKind["PodDisruptionBudget"] {
		sel, err := k8scheck.BudgetSelector(o)
		if err != nil {
			t.Fatal(err)
		}
		if !k8scheck.Selects(sel, podLabels) {
			t.Errorf("PodDisruptionBudget %s does not select the pods", o.Name)
		}
	}
	for _, o := range byKind["PodMonitor"] {
		var pm struct {
			Spec struct {
				JobLabel string `yaml:"jobLabel"`
				Selector struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				} `yaml:"selector"`
				Endpoints []struct {
					Port string `yaml:"port"`
					Path string `yaml:"path"`
				} `yaml:"podMetricsEndpoints"`
			} `yaml:"spec"`
		}
		decodeInto(t, o.Raw, &pm)
		if !k8scheck.Selects(pm.Spec.Selector.MatchLabels, podLabels) {
			t.Errorf("PodMonitor %s does not select the pods", o.Name)
		}
		if podLabels[pm.Spec.JobLabel] != "dedup" {
			t.Errorf("PodMonitor %s: jobLabel %q must give job=\"dedup\" (the alerts select it)", o.Name, pm.Spec.JobLabel)
		}
		for _, e := range pm.Spec.Endpoints {
			if portNames[e.Port] == 0 || e.Path != "/metrics" {
				t.Errorf("PodMonitor %s endpoint %s%s: want port %v, /metrics", o.Name, e.Port, e.Path, portNames)
			}
		}
	}

	// The kustomization lists files that exist and rewrites the dedup image.
	for _, o := range byKind["Kustomization"] {
		var k struct {
			Resources []string `yaml:"resources"`
			Images    []struct {
				Name string `yaml:"name"`
			} `yaml:"images"`
		}
		decodeInto(t, o.Raw, &k)
		for _, r := range k.Resources {
			if _, err := os.Stat(path("deploy", "kubernetes", r)); err != nil {
				t.Errorf("kustomization resource %s: %v", r, err)
			}
		}
		if len(k.Images) == 0 || k.Images[0].Name != dedupImage {
			t.Errorf("kustomization images: want an entry for %q", dedupImage)
		}
	}
}

// filterBytes is rotation's own figure for one partition's pair of filters.
func filterBytes(t *testing.T, keys, fp, mode string) int {
	t.Helper()
	n, err := strconv.ParseUint(keys, 10, 64)
	if err != nil {
		t.Fatalf("DEDUP_EXPECTED_KEYS %q: %v", keys, err)
	}
	p, err := strconv.ParseFloat(fp, 64)
	if err != nil {
		t.Fatalf("DEDUP_FP_RATE %q: %v", fp, err)
	}
	m, err := rotation.ParseMode(mode)
	if err != nil {
		t.Fatalf("DEDUP_MODE %q: %v", mode, err)
	}
	pair, err := rotation.New(rotation.Options{ExpectedKeys: n, FPRate: p, Window: time.Hour, Mode: m})
	if err != nil {
		t.Fatalf("rotation.New: %v", err)
	}
	return pair.SizeBytes()
}

// ---------------------------------------------------------------------------
// Prometheus files: promtool, the PrometheusRule mirror, annotations.

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("promtool not found (CI installs Debian's prometheus package): %v", err)
		}
		t.Skipf("promtool not found (apt-get install prometheus): %v", err)
	}
	return p
}

func TestPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "config", path("deploy", "prometheus", "prometheus.yml")},
		{"check", "rules", path("deploy", "prometheus", "alerts.yml")},
		{"test", "rules", path("deploy", "prometheus", "alerts_test.yml")},
	} {
		t.Run(strings.Join(args[:2], "_"), func(t *testing.T) {
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		})
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	decodeInto(t, loadYAML(t, path("deploy", "prometheus", "alerts.yml")), &rf)
	return rf
}

func TestAlertRules(t *testing.T) {
	rf := loadRules(t)
	want := []string{ // the alerts the issue asks for, by what they catch
		"DedupFalsePositiveRateAboveTarget",   // false-positive rate above target
		"DedupFilterFillHeadingForSaturation", // fill heading for saturation before the window ends
		"DedupCheckpointTooOld",               // checkpoint age too high
		"DedupCheckpointFailing",              // checkpoint failing
		"DedupRestoredFromEmpty",              // restores from empty
		"DedupConsumerLagGrowing",             // lag growing
		"DedupRateShifted",                    // dedup rate far from its usual level
		"DedupProduceErrors",                  // produce errors
		"DedupOutputRefused",                  // an input partition stopped by a refused output
		"DedupDown",                           // target down
		"DedupTargetMissing",                  // target gone from discovery: absent(up)
		"DedupTopicMissing",                   // input or output topic missing or deleted
		"DedupBrokersUnreachable",             // brokers lost at runtime
	}
	var names []string
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			if r.Alert == "" {
				continue
			}
			if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
				t.Errorf("alert %s: severity %q", r.Alert, r.Labels["severity"])
			}
			if !strings.Contains(r.Expr, `job="dedup"`) {
				t.Errorf("alert %s: select job=\"dedup\" so that other jobs' series cannot match", r.Alert)
			}
		}
	}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Errorf("alert %s missing", w)
		}
	}

	// The PrometheusRule carries exactly the same groups.
	var pr struct {
		Spec any `yaml:"spec"`
	}
	decodeInto(t, loadYAML(t, path("deploy", "kubernetes", "prometheusrule.yaml")), &pr)
	var alerts any
	decodeInto(t, loadYAML(t, path("deploy", "prometheus", "alerts.yml")), &alerts)
	if !reflect.DeepEqual(pr.Spec, alerts) {
		t.Errorf("deploy/kubernetes/prometheusrule.yaml spec differs from deploy/prometheus/alerts.yml: regenerate it (indent alerts.yml's groups under spec:)")
	}
}

// ---------------------------------------------------------------------------
// The Grafana dashboard (static checks; prometheus_test.go runs its queries).

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(path("deploy", "grafana", "dashboards", "dedup.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	return d
}

func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("dashboard needs a title and a uid")
	}
	ids := map[int]bool{}
	var exprs []string
	panels := allPanels(d.Panels)
	for i, p := range panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %s: empty expr", p.Title, tg.RefID)
			}
			exprs = append(exprs, tg.Expr)
		}
		a := p.GridPos
		if a.W <= 0 || a.H <= 0 || a.X+a.W > 24 {
			t.Errorf("panel %q: gridPos %+v", p.Title, a)
		}
		for _, q := range panels[:i] {
			b := q.GridPos
			if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
				t.Errorf("panels %q and %q overlap", p.Title, q.Title)
			}
		}
	}
	// What the issue asks the dashboard to show, by the series that show it.
	all := strings.Join(exprs, "\n")
	for _, want := range []string{
		`outcome="duplicate"`, // dedup rate
		"dedup_messages_total",
		`outcome=~"retraction|unkeyed"`,
		"dedup_filter_fill_ratio",
		"dedup_filter_false_positive_rate",
		"dedup_filter_false_positive_target",
		"dedup_rotations_total",
		"dedup_consumer_lag",
		"dedup_end_to_end_latency_seconds_bucket",
		"dedup_checkpoint_last_success_timestamp_seconds",
		"dedup_checkpoint_duration_seconds_bucket",
		"dedup_checkpoint_size_bytes",
		"sum by (source) (increase(dedup_restores_total",
		"sum by (kind) (rate(dedup_output_errors_total",
		"dedup_partitions_stalled",
		"dedup_embedded_broker",
		"sum by (topic, partition)", // per partition
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no dashboard query uses %s", want)
		}
	}
}

// TestDashboardLostRecords: the dashboard states the filters' false
// positives as records lost a day, from the model and as counted, and
// shows the fingerprint overload.
func TestDashboardLostRecords(t *testing.T) {
	var drops []string
	var all []string
	for _, p := range allPanels(loadDashboard(t).Panels) {
		for _, tg := range p.Targets {
			all = append(all, tg.Expr)
			if p.Title == "Expected false drops per day" {
				drops = append(drops, tg.Expr)
			}
		}
	}
	if len(drops) == 0 {
		t.Fatal(`no panel "Expected false drops per day"`)
	}
	// Each query is the model (new records × the pair's rate now) or the
	// counter (each key weighted by the rate it was tested at).
	counted := 0
	for _, e := range drops {
		wants := []string{`outcome="forwarded"`, "dedup_filter_false_positive_rate", "86400"}
		if strings.Contains(e, "dedup_expected_false_drops_total") {
			wants = []string{"rate(dedup_expected_false_drops_total", "86400"}
			counted++
		}
		for _, want := range wants {
			if !strings.Contains(e, want) {
				t.Errorf("expected false drops query lacks %s: %s", want, e)
			}
		}
	}
	if counted == 0 || counted == len(drops) {
		t.Errorf("the panel shows %d counted and %d modelled queries, want both", counted, len(drops)-counted)
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{"dedup_filter_overflow_total", "dedup_filter_early_rotations_total",
		"dedup_filter_forgotten_keys_total", "dedup_filter_stashed"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no dashboard query uses %s", want)
		}
	}
}

// TestComposeConfig asks Compose itself to validate docker-compose.yml, where
// a Compose client is installed (it needs no Docker engine for this).
func TestComposeConfig(t *testing.T) {
	var cmd *exec.Cmd
	if p, err := exec.LookPath("docker-compose"); err == nil {
		cmd = exec.Command(p, "-f", "docker-compose.yml", "config", "-q")
	} else if p, err := exec.LookPath("docker"); err == nil && exec.Command(p, "compose", "version").Run() == nil {
		cmd = exec.Command(p, "compose", "-f", "docker-compose.yml", "config", "-q")
	} else {
		t.Skip("no Compose client (docker compose or docker-compose); the YAML checks above still ran")
	}
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

// ---------------------------------------------------------------------------
// No toy broker by accident.

// buildDedup builds cmd/dedup into a temporary directory.
func buildDedup(t *testing.T) string {
	t.Helper()
	bin, err := testkit.BuildBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// runWithEnv runs the binary with exactly env and returns its exit code and
// stderr; it fails the test if the binary still runs after limit.
func runWithEnv(t *testing.T, bin string, env map[string]string, limit time.Duration) (int, string) {
	t.Helper()
	cmd := exec.Command(bin)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("still running after %v; stderr:\n%s", limit, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// TestImageRequiresBrokers runs the binary with the image's environment:
// without KAFKA_BROKERS it refuses to start (exit 2, naming the variable)
// instead of running the embedded broker; with it, configuration passes and
// start-up looks for the brokers.
func TestImageRequiresBrokers(t *testing.T) {
	d := parseDockerfile(t)
	if d.Env["DEDUP_REQUIRE_BROKERS"] != "true" {
		t.Fatalf("the image must set DEDUP_REQUIRE_BROKERS=true, has %q", d.Env["DEDUP_REQUIRE_BROKERS"])
	}
	bin := buildDedup(t)
	env := map[string]string{}
	for k, v := range d.Env {
		env[k] = v
	}
	env["DATA_DIR"] = t.TempDir() // the image's /var/lib/dedup is not ours to write
	env["METRICS_ADDR"] = "127.0.0.1:0"
	code, stderr := runWithEnv(t, bin, env, 10*time.Second)
	if code != 2 || !strings.Contains(stderr, "KAFKA_BROKERS: must be set") {
		t.Errorf("image environment without KAFKA_BROKERS: exit %d, want 2 naming KAFKA_BROKERS; stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(env["DATA_DIR"], "broker")); err == nil {
		t.Error("the embedded broker started")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	env["KAFKA_BROKERS"] = closed
	env["KAFKA_STARTUP_TIMEOUT"] = "1s"
	code, stderr = runWithEnv(t, bin, env, 15*time.Second)
	if code != 1 || !strings.Contains(stderr, "no Kafka broker of "+closed) {
		t.Errorf("image environment with an unreachable KAFKA_BROKERS: exit %d, want 1 after start-up gave up; stderr:\n%s", code, stderr)
	}
}

// TestStartupProbeOutlastsStartupTimeout: the Deployment's startupProbe
// lets the binary give up by itself (one clear log line, exit 1) before
// Kubernetes kills it for failing /healthz during start-up.
func TestStartupProbeOutlastsStartupTimeout(t *testing.T) {
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						StartupProbe struct {
							PeriodSeconds    int `yaml:"periodSeconds"`
							FailureThreshold int `yaml:"failureThreshold"`
						} `yaml:"startupProbe"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	for _, o := range loadManifests(t) {
		switch o.Kind {
		case "Deployment":
			decodeInto(t, o.Raw, &dep)
		case "ConfigMap":
			decodeInto(t, o.Raw, &cm)
		}
	}
	timeout := cm.Data["KAFKA_STARTUP_TIMEOUT"]
	if timeout == "" {
		timeout = configVarSet(t)["KAFKA_STARTUP_TIMEOUT"].Default
	}
	d, err := time.ParseDuration(timeout)
	if err != nil {
		t.Fatalf("KAFKA_STARTUP_TIMEOUT %q: %v", timeout, err)
	}
	p := dep.Spec.Template.Spec.Containers[0].StartupProbe
	if window := time.Duration(p.PeriodSeconds*p.FailureThreshold) * time.Second; window <= d {
		t.Errorf("startupProbe allows %v, not more than KAFKA_STARTUP_TIMEOUT %v", window, d)
	}
}
