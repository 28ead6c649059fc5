package e2e_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/testkit"
)

// prevRelease is the release an operator upgrades from and downgrades to,
// as far as checkpoints go: the last commit of checkpoint/ before chains
// (bases and increments), which writes and reads full snapshots only. It
// ignores increments and tombstones every Kafka chunk no snapshot it
// knows refers to (docs/operations.md#upgrading).
const prevRelease = "11cda52a12df6e19671635202d3b7d07373c5c38"

// upgradeRecords at upgradePace per second: the input flows for about
// 20 s, through every step of the deploy.
const (
	upgradeRecords = 12000
	upgradePace    = 600
)

// TestUpgradeDowngrade runs two members of the previous release, upgrades
// them one at a time to this one (a rolling deploy), kills one, downgrades
// them one at a time and upgrades them again, while records flow; then a
// piece of the newest chain of partition 0 is damaged on purpose while the
// stage is stopped, and a member of this release restarts alone. Both
// stores: the output holds every first occurrence exactly once; after the
// downgrade and upgrade again no member of this release reports a damaged
// checkpoint (the pieces the previous release left behind are
// superseded, not damaged) until the injected damage, which is reported
// once, by name.
func TestUpgradeDowngrade(t *testing.T) {
	prev := buildPrevRelease(t)
	for _, store := range []string{"file", "kafka"} {
		t.Run(store, func(t *testing.T) { testUpgradeDowngrade(t, store, prev) })
	}
}

// buildPrevRelease builds the binary of prevRelease from this repository's
// history (git archive, go build with the shared module cache) into a
// directory of the test's, for its subtests to share. It skips the test
// where the history is not there.
func buildPrevRelease(t *testing.T) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on PATH: the previous release is built from the repository's history")
	}
	if out, err := exec.Command(git, "cat-file", "-e", prevRelease+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("the previous release's commit %s is not in this clone (a shallow clone, or no git work tree: %s); fetch the history to run the test",
			prevRelease[:7], strings.TrimSpace(string(out)))
	}
	top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("find the work tree: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	archive := exec.Command(git, "archive", "--format=tar", prevRelease)
	archive.Dir = strings.TrimSpace(string(top)) // from a subdirectory it would archive only that
	stdout, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	archive.Stderr = &stderr
	if err := archive.Start(); err != nil {
		t.Fatalf("git archive %s: %v", prevRelease[:7], err)
	}
	extractErr := untar(stdout, src)
	_, _ = io.Copy(io.Discard, stdout)
	if err := errors.Join(archive.Wait(), extractErr); err != nil {
		t.Fatalf("git archive %s: %v %s", prevRelease[:7], err, stderr.String())
	}
	bin := filepath.Join(dir, "dedup-prev")
	start := time.Now()
	build := exec.Command(testkit.GoTool(), "build", "-o", bin, "./cmd/dedup")
	build.Dir = src
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the previous release %s: %v\n%s", prevRelease[:7], err, out)
	}
	t.Logf("built the previous release %s in %s", prevRelease[:7], time.Since(start).Round(time.Millisecond))
	return bin
}

// untar writes the directories and regular files of a tar stream under dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read archive: %w", err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("read archive: %q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			err = writeFrom(tr, path, h.FileInfo().Mode().Perm())
		}
		if err != nil {
			return fmt.Errorf("extract %s: %w", h.Name, err)
		}
	}
}

func writeFrom(r io.Reader, path string, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Close())
}

// startBinaryProc is startProc with another build of the binary.
func startBinaryProc(t *testing.T, name, bin string, env map[string]string) *proc {
	t.Helper()
	env = cloneEnv(env)
	env["METRICS_ADDR"] = testkit.FreeAddr(t)
	p := &proc{name: name, metrics: env["METRICS_ADDR"], logPath: filepath.Join(logDir(t), name+".log")}
	logf, err := os.Create(p.logPath)
	if err != nil {
		t.Fatalf("create log of %s: %v", name, err)
	}
	defer logf.Close()
	p.Process = testkit.StartProcess(t, bin, nil, env, logf, logf, func() string { return tail(p.logPath, 12<<10) })
	p.started = time.Now()
	return p
}

// damagedLines are the lines of p's log that call a checkpoint damaged or
// unreachable: what dedup_checkpoint_damaged_total counts.
func damagedLines(t *testing.T, p *proc) []string {
	t.Helper()
	return logLines(t, p, `msg="checkpoint damaged`, `msg="checkpoint increment unreachable`)
}

// logLines are the lines of p's log holding any of subs.
func logLines(t *testing.T, p *proc, subs ...string) []string {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		t.Fatalf("read log of %s: %v", p.name, err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

func testUpgradeDowngrade(t *testing.T, store, prev string) {
	began := time.Now()
	sc := newScenario(t, upgradeRecords)
	brokers, w, obs := sc.brokers, sc.w, sc.obs
	// Two members on one checkpoint store (for files: one shared
	// directory, as on a shared volume).
	env := [2]map[string]string{stageEnv(t, brokers, store), stageEnv(t, brokers, store)}
	env[1]["CHECKPOINT_DIR"] = env[0]["CHECKPOINT_DIR"]

	var names procSet
	var members [2]*proc
	var current []*proc // every member of this release started
	start := func(i int, bin string) {
		release := "prev"
		if bin == binPath {
			release = "cur"
		}
		members[i] = startBinaryProc(t, names.next(fmt.Sprintf("%s-%c", release, 'A'+i)), bin, env[i])
		if bin == binPath {
			current = append(current, members[i])
		}
	}
	var pr *producer
	guard := func() error { return errors.Join(pr.check(), alive(members[0], members[1])) }
	settle := func() { waitSettled(t, 60*time.Second, guard, members[0], members[1]) }
	// restoredWhole: a member started after the first two restored every
	// partition it took from checkpoints (or kept it in memory), and found
	// no damage, whichever release wrote what it read. It started one
	// empty only beside the pair it read, kept as a legacy pair: what a
	// restore across a change of the fingerprint filters' sizing does
	// (docs/operations.md#fingerprint-filters-of-another-sizing), logged
	// once for each such partition.
	var first [2]*proc
	restoredWhole := func(p *proc) {
		if p == first[0] || p == first[1] {
			return
		}
		samples := mustScrape(t, p)
		legacy := len(logLines(t, p, `msg="checkpoint built with other filter options: new filters start empty`))
		if n, _ := sum(samples, "dedup_restores_total", map[string]string{"source": "empty"}); n > float64(legacy) {
			t.Errorf("%s restored %v partitions empty, %d of them keeping the pair it read as legacy; want every one from its checkpoints", p.name, n, legacy)
		}
		if n, _ := sum(samples, "dedup_checkpoint_damaged_total", nil); n != 0 {
			t.Errorf("%s: dedup_checkpoint_damaged_total %v, want 0", p.name, n)
		}
	}
	// replace stops member i (SIGTERM, or SIGKILL) once the group is
	// settled, and starts bin in its place.
	replace := func(i int, bin string, kill bool) {
		settle()
		restoredWhole(members[i])
		if kill {
			members[i].kill(t)
		} else {
			members[i].termOK(t)
		}
		start(i, bin)
	}
	step := func(at float64, what string, do func()) {
		target := int64(at * float64(w.nFirsts))
		obs.waitProgress(t, 60*time.Second, target, fmt.Sprintf("the output to reach %d keys (%s)", target, what), guard)
		do()
		t.Logf("%s at %d keys forwarded, %s in", what, obs.progress(), time.Since(began).Round(time.Millisecond))
	}

	start(0, prev)
	start(1, prev)
	first = members
	pr = startPacedProducer(t, brokers, w, obs, 1500, upgradePace)
	step(0.12, "rolling upgrade", func() { replace(0, binPath, false); replace(1, binPath, false) })
	step(0.28, "a crash after it", func() { replace(0, binPath, true) })
	step(0.42, "rolling downgrade", func() { replace(0, prev, false); replace(1, prev, false) })
	step(0.58, "rolling upgrade again", func() { replace(0, binPath, false); replace(1, binPath, false) })
	obs.waitProgress(t, 60*time.Second, int64(0.74*float64(w.nFirsts)), "the upgraded members to checkpoint a while", guard)
	settle()

	// What the previous release left behind is no damage to this one.
	for _, p := range members {
		restoredWhole(p)
	}
	for _, p := range current {
		if lines := damagedLines(t, p); len(lines) > 0 {
			t.Errorf("%s called %d checkpoints damaged after a downgrade and an upgrade again:\n%s", p.name, len(lines), strings.Join(lines, "\n"))
		}
	}

	// Real damage still is: the newest piece of partition 0, damaged while
	// the stage is stopped, is reported by the member that restores it.
	for _, p := range members {
		p.sigterm(t)
	}
	for _, p := range members {
		p.waitTermOK(t)
	}
	where := damageNewestPiece(t, store, brokers, env[0])
	last := startBinaryProc(t, names.next("cur-A"), binPath, env[0])
	guard = func() error { return errors.Join(pr.check(), alive(last)) }
	waitFor(t, 60*time.Second, "the damaged piece to be reported", func() error {
		if err := guard(); err != nil {
			return err
		}
		samples, err := scrape(last, 2*time.Second)
		if err != nil {
			return fmt.Errorf("%w: %v", errNotYet, err)
		}
		if n, _ := sum(samples, "dedup_checkpoint_damaged_total", nil); n < 1 {
			return errNotYet
		}
		return nil
	})
	pr.waitDone(t, 90*time.Second, guard)
	obs.waitSentinels(t, 60*time.Second, guard)
	waitLagZero(t, last)
	if n := metric(t, last, "dedup_checkpoint_damaged_total", map[string]string{"partition": "0"}); n != 1 {
		t.Errorf("dedup_checkpoint_damaged_total{partition=0} %v, want 1: the injected damage", n)
	}
	if n := metric(t, last, "dedup_checkpoint_damaged_total", nil); n != 1 {
		t.Errorf("dedup_checkpoint_damaged_total %v, want 1: the injected damage only", n)
	}
	last.termOK(t)
	if lines := damagedLines(t, last); len(lines) != 1 || !strings.Contains(lines[0], where) || !strings.Contains(lines[0], "checksum mismatch") {
		t.Errorf("%d damaged lines, want one naming %s, a checksum mismatch:\n%s", len(lines), where, strings.Join(lines, "\n"))
	}
	verify(t, w, obs.drain(t, brokers))
	t.Logf("%s store: %s", store, time.Since(began).Round(time.Millisecond))
}

// damageNewestPiece damages the newest piece of input partition 0 of the
// stage env configures, as a disk or a broker would, and returns where the
// stage will name it: the file (file store), or the manifest key whose
// chunk 0 it overwrote with other bytes under its key (Kafka store).
func damageNewestPiece(t *testing.T, store, brokers string, env map[string]string) string {
	t.Helper()
	group, input := env["GROUP_ID"], env["INPUT_TOPIC"]
	if store == "file" {
		part := filepath.Join(env["CHECKPOINT_DIR"], group, input, "0")
		names, err := filepath.Glob(filepath.Join(part, "0*.*")) // pieces are named by their zero-padded seq
		if err != nil || len(names) == 0 {
			t.Fatalf("no piece of partition 0 in %s (%v)", part, err)
		}
		newest := names[len(names)-1]
		testkit.Corrupt(t, newest)
		t.Logf("damaged %s", newest)
		return newest
	}
	topic := group + "-dedup-state" // CHECKPOINT_TOPIC's default
	recs, err := readTopic(brokers, topic)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]*kgo.Record{}
	for _, r := range recs {
		if r.Value == nil {
			delete(live, string(r.Key))
		} else {
			live[string(r.Key)] = r
		}
	}
	prefix := url.PathEscape(group) + "/" + input + "/0/"
	var newest string
	var newestSeq uint64
	for key := range live {
		f := strings.Split(strings.TrimPrefix(key, prefix), "/")
		if !strings.HasPrefix(key, prefix) || (f[0] != "m" && f[0] != "i") {
			continue
		}
		if seq, err := strconv.ParseUint(f[1], 10, 64); err == nil && seq >= newestSeq {
			newest, newestSeq = key, seq
		}
	}
	if newest == "" {
		t.Fatalf("no manifest of partition 0 among %d records of %s", len(recs), topic)
	}
	var man struct {
		Nonce string `json:"nonce"`
	}
	if err := json.Unmarshal(live[newest].Value, &man); err != nil {
		t.Fatalf("decode manifest %s: %v", newest, err)
	}
	chunkKey := fmt.Sprintf("%sc/%020d/%s/%06d", prefix, newestSeq, man.Nonce, 0)
	chunk := live[chunkKey]
	if chunk == nil {
		t.Fatalf("chunk %s of %s not found", chunkKey, newest)
	}
	bad := append([]byte(nil), chunk.Value...)
	bad[len(bad)/2] ^= 0xff
	cl := newProducerClient(t, brokers)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: chunk.Partition, Key: chunk.Key, Value: bad}).FirstErr(); err != nil {
		t.Fatalf("overwrite chunk %s: %v", chunkKey, err)
	}
	t.Logf("damaged chunk 0 of %s", newest)
	return newest
}
