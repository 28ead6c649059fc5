package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"dedup/internal/buildinfo"
	"dedup/internal/config"
	"dedup/internal/statuspage"
	"dedup/processor"
	"dedup/processor/repartition"
	"dedup/registry"
)

// Probe is what the HTTP endpoints ask the processor.
type Probe interface {
	Ready() bool
	Healthy() error
}

// stageProbe answers for the hops the stage runs: ready, and healthy,
// only when each of them is. With REPARTITION_TOPIC, hop 1's reasons are
// named "re-key hop".
type stageProbe struct {
	hop1    *repartition.Status  // nil without the re-key hop
	hop2    *processor.Processor // nil without the dedup hop
	schemas hopStatus            // nil without schema-framed keys
}

func (p stageProbe) Ready() bool { return p.Readiness() == nil }

func (p stageProbe) Readiness() error { return p.each(hopStatus.Readiness) }

func (p stageProbe) Healthy() error { return p.each(hopStatus.Healthy) }

// hopStatus is what both hops say of themselves.
type hopStatus interface {
	Readiness() error
	Healthy() error
}

// each joins what ask says of every hop the stage runs, the dedup hop's
// first.
func (p stageProbe) each(ask func(hopStatus) error) error {
	var errs []error
	if p.hop2 != nil {
		errs = append(errs, ask(p.hop2))
	}
	if p.hop1 != nil {
		errs = append(errs, ask(p.hop1))
	}
	if p.schemas != nil {
		errs = append(errs, ask(p.schemas))
	}
	return errors.Join(errs...)
}

// schemaStatus is the schema registry's part of readiness: not ready while
// records wait for a schema the registry does not answer for (an outage,
// or refused credentials), naming the registry and why. A registry down
// while every schema needed is cached holds nothing back and is not a
// reason. Never unhealthy: a restart would not bring the registry back.
type schemaStatus struct{ c *registry.Client }

func (s schemaStatus) Readiness() error {
	if s.c.Stats().Waiting == 0 {
		return nil
	}
	if err := s.c.Health(); err != nil {
		return fmt.Errorf("records wait for their schema: %w", err)
	}
	return nil
}

func (schemaStatus) Healthy() error { return nil }

// newRegistry is the binary's own registry: the processor's families plus
// the process and Go runtime collectors, the build, whether the broker is
// the embedded one, and nothing from the global default.
func newRegistry(cfg *config.Config, b buildinfo.Info) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dedup_build_info",
		Help: "Always 1; labels name the build (as 'dedup version' reports it) and the filter mode.",
	}, []string{"version", "commit", "goversion", "mode"})
	build.WithLabelValues(b.Version, b.Commit, b.GoVersion, cfg.FilterOptions().Mode.String()).Set(1)
	embedded := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dedup_embedded_broker",
		Help: "1 when the process runs its own embedded single-node broker (KAFKA_BROKERS empty), which is not for production; 0 with KAFKA_BROKERS set.",
	})
	if cfg.Embedded() {
		embedded.Set(1)
	}
	reg.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
		build,
		embedded,
	)
	return reg
}

// statusServer serves the status page (/), /metrics, /healthz and /readyz
// on METRICS_ADDR.
type statusServer struct {
	ln  net.Listener
	srv *http.Server
	log *slog.Logger
}

// probeForm is what the status page's probe form needs: the key probe's
// bound address (empty: no probe) and DEDUP_KEY's sources, one field each
// when there are several.
type probeForm struct {
	addr  string
	parts []string
}

// listenStatus binds addr now, so that a taken port fails the start rather
// than surfacing later; Serve starts answering.
func listenStatus(addr string, reg *prometheus.Registry, probe Probe, form probeForm, log *slog.Logger) (*statusServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on METRICS_ADDR %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := probe.Healthy(); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if r, ok := probe.(interface{ Readiness() error }); ok {
			if err := r.Readiness(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		} else if !probe.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	po := statuspage.Options{Gatherer: reg, Probe: statuspage.ProbeOn(form.addr), KeyParts: form.parts}
	if r, ok := probe.(interface{ Readiness() error }); ok {
		po.Readiness = r.Readiness // what /readyz says
	}
	page := statuspage.New(po)
	mux.Handle("GET /{$}", page)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	// The chart's samples are taken while the server is up.
	sampling, stop := context.WithCancel(context.Background())
	srv.RegisterOnShutdown(stop)
	go page.Run(sampling)
	return &statusServer{ln: ln, srv: srv, log: log}, nil
}

// Addr is the bound address (useful when METRICS_ADDR asks for port 0).
func (s *statusServer) Addr() string { return s.ln.Addr().String() }

// StatusPage is the status page's address, empty without METRICS_ADDR;
// localhost when the server listens on every interface.
func (s *Service) StatusPage() string {
	if s.status == nil {
		return ""
	}
	host, port, err := net.SplitHostPort(s.status.Addr())
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// Serve answers requests until Shutdown.
func (s *statusServer) Serve() {
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("serve metrics", "err", err)
	}
}

// Shutdown stops accepting and waits for requests in flight until ctx ends.
func (s *statusServer) Shutdown(ctx context.Context) error {
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down metrics server: %w", err)
	}
	return nil
}
