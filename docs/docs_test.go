package docs_test

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, relative to this package's directory.
const root = ".."

// maxReadmeLines bounds the README: it is for users, and everything else
// belongs in a page of docs/.
const maxReadmeLines = 450

// interfaceNames are the names of the stage's outside interface: other
// systems rely on each of them, so the README must document every one.
var interfaceNames = []string{
	// environment variables
	"KAFKA_BROKERS", "EMBEDDED_BROKER_ADDR", "KAFKA_START_OFFSET", "INPUT_TOPIC",
	"OUTPUT_TOPIC", "GROUP_ID", "DEDUP_KEY", "DEDUP_WINDOW", "DEDUP_EXPECTED_KEYS",
	"DEDUP_FP_RATE", "DEDUP_RETRACT_HEADER", "CHECKPOINT_STORE", "CHECKPOINT_TOPIC",
	"CHECKPOINT_DIR", "CHECKPOINT_INTERVAL", "KAFKA_SESSION_TIMEOUT", "METRICS_ADDR",
	"DATA_DIR",
	// the binary and its signals
	"go run ./cmd/dedup", "SIGTERM", "SIGINT",
	// output headers
	"dedup-source-topic", "dedup-source-partition", "dedup-source-offset",
	// metrics and probes
	"dedup_messages_total", "forwarded", "duplicate", "retraction", "unkeyed",
	"/metrics", "/healthz", "/readyz",
}

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pages returns the README and every Markdown page under docs/, as paths
// relative to the repository root.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReadmeIsShort(t *testing.T) {
	n := strings.Count(readFile(t, "README.md"), "\n")
	if n >= maxReadmeLines {
		t.Errorf("README.md has %d lines, want fewer than %d: move details to a page of docs/", n, maxReadmeLines)
	}
}

func TestReadmeDocumentsTheOutsideInterface(t *testing.T) {
	readme := readFile(t, "README.md")
	for _, name := range interfaceNames {
		if !strings.Contains(readme, name) {
			t.Errorf("README.md does not mention %q, a name of the stage's outside interface", name)
		}
	}
}

// link is one Markdown link: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// codeFence toggles a fenced code block, where links are not links.
var codeFence = regexp.MustCompile("^\\s*```")

// links returns the link targets of a Markdown text outside code blocks.
func links(text string) []string {
	var out []string
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if codeFence.MatchString(line) {
			inCode = !inCode
			continue
		}
		if inCode {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// anchors returns the heading anchors GitHub gives a Markdown text:
// lowercased, punctuation other than '-' and '_' dropped, spaces turned into
// '-', and repeats numbered.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if codeFence.MatchString(line) {
			inCode = !inCode
			continue
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func TestLinksResolve(t *testing.T) {
	for _, page := range pages(t) {
		text := readFile(t, page)
		for _, target := range links(text) {
			if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "mailto:") {
				continue // checked by TestNothingOutsideTheRepository
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
				if dest == ".." || strings.HasPrefix(dest, "../") {
					t.Errorf("%s: link %q leaves the repository", page, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s: link %q: %s does not exist", page, target, dest)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(dest, ".md") && !anchors(readFile(t, dest))[frag] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", page, target, dest, frag)
			}
		}
	}
}

func TestEveryPageIsIndexed(t *testing.T) {
	linked := map[string]bool{}
	for _, from := range []string{"README.md", "docs/README.md"} {
		for _, target := range links(readFile(t, from)) {
			file, _, _ := strings.Cut(target, "#")
			if file != "" {
				linked[filepath.ToSlash(filepath.Join(filepath.Dir(from), file))] = true
			}
		}
	}
	for _, page := range pages(t) {
		if page != "README.md" && !linked[page] {
			t.Errorf("%s is linked from neither README.md nor docs/README.md", page)
		}
	}
	if !linked["docs/README.md"] {
		t.Errorf("README.md does not link docs/README.md, the index of the documentation")
	}
}

// narration matches text that tells the history of the work instead of
// describing the project: that history is in git.
var narration = regexp.MustCompile(`(?i)\b(this|that|the previous|previous|earlier|last|next|an earlier|two) sessions?\b|\bsessions? (ago|before)\b|\bwe (tried|measured|found|changed|replaced)\b|\bpreviously\b|\bround-by-round\b|\bprevious round\b`)

func TestNoNarration(t *testing.T) {
	for _, page := range pages(t) {
		for i, line := range strings.Split(readFile(t, page), "\n") {
			if m := narration.FindString(line); m != "" {
				t.Errorf("%s:%d: %q narrates the work; say what is, and leave its history to git", page, i+1, m)
			}
		}
	}
}

// TestNoMergeConflictMarkers: a page with a merge's conflict markers left
// in it renders both sides.
func TestNoMergeConflictMarkers(t *testing.T) {
	for _, page := range pages(t) {
		for i, line := range strings.Split(readFile(t, page), "\n") {
			if strings.HasPrefix(line, "<<<<<<< ") || strings.HasPrefix(line, ">>>>>>> ") {
				t.Errorf("%s:%d: merge conflict marker %q", page, i+1, line)
			}
		}
	}
}

// outside matches references to things outside the repository: paths of
// the machine it was written on and the material it was written from.
var outside = regexp.MustCompile(`/work/|\.\./shared|shared/(seeds|contract)|(?i)seed articles?\b`)

// webAddress matches a web address; its host is the first group.
var webAddress = regexp.MustCompile(`https?://([^/\s)>\]:]+)`)

// localHosts are the only hosts a page may send users to: the services the
// local demo starts.
var localHosts = []string{"localhost", "127.0.0.1"}

func TestNothingOutsideTheRepository(t *testing.T) {
	for _, page := range pages(t) {
		for i, line := range strings.Split(readFile(t, page), "\n") {
			for _, m := range outside.FindAllString(line, -1) {
				t.Errorf("%s:%d: %q refers to something outside the repository", page, i+1, m)
			}
			for _, m := range webAddress.FindAllStringSubmatch(line, -1) {
				// The .example domain is reserved for documentation (RFC 2606):
				// a placeholder such as the alerts' runbook_url host.
				if !slices.Contains(localHosts, m[1]) && !strings.HasSuffix(m[1], ".example") {
					t.Errorf("%s:%d: %q is an address outside the repository", page, i+1, m[0])
				}
			}
		}
	}
}

// alertName matches an alert rule's name in deploy/prometheus/alerts.yml.
var alertName = regexp.MustCompile(`^\s*-\s*alert:\s*(\S+)`)

func TestEveryAlertHasARunbookEntry(t *testing.T) {
	runbook := readFile(t, "docs/operations.md")
	var headings []string
	for _, line := range strings.Split(runbook, "\n") {
		if strings.HasPrefix(line, "### ") {
			headings = append(headings, strings.Fields(strings.TrimPrefix(line, "### "))[0])
		}
	}
	sc := bufio.NewScanner(strings.NewReader(readFile(t, "deploy/prometheus/alerts.yml")))
	n := 0
	for sc.Scan() {
		m := alertName.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n++
		if !slices.Contains(headings, m[1]) {
			t.Errorf("alert %s has no \"### %s\" section in docs/operations.md", m[1], m[1])
		}
	}
	if n == 0 {
		t.Fatal("deploy/prometheus/alerts.yml: no alert rules found")
	}
}

// isoDate matches a date of measurement as the pages write it.
var isoDate = regexp.MustCompile(`\b20\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])\b`)

// TestMeasuredFiguresAreDated: a figure is true of the build and the day it
// was measured on, so a paragraph that says "Measured" must name that day
// (YYYY-MM-DD) for a reader to judge whether it still holds. Headings and
// fenced code are not paragraphs.
func TestMeasuredFiguresAreDated(t *testing.T) {
	for _, page := range pages(t) {
		if !strings.HasPrefix(page, "docs/") {
			continue
		}
		var para []string
		start, fenced := 0, false
		check := func() {
			text := strings.Join(para, "\n")
			if strings.Contains(text, "Measured") && !isoDate.MatchString(text) {
				t.Errorf("%s:%d: a paragraph says \"Measured\" but names no date (YYYY-MM-DD) of the measurement", page, start)
			}
			para = para[:0]
		}
		for i, line := range strings.Split(readFile(t, page), "\n") {
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, "```") {
				fenced = !fenced
				check()
				continue
			}
			if fenced || strings.HasPrefix(trimmed, "#") {
				continue
			}
			if trimmed == "" {
				check()
				continue
			}
			if len(para) == 0 {
				start = i + 1
			}
			para = append(para, line)
		}
		check()
	}
}

// packagesWithFileLists are the packages whose doc.go lists their files.
var packagesWithFileLists = []string{"processor", "processor/partition", "processor/output", "processor/cluster", "processor/lease", "processor/metrics",
	"checkpoint", "key", "sizing", "internal/config", "internal/service", "internal/check", "internal/demo"}

// fileName matches a Go file's name in a package doc.
var fileName = regexp.MustCompile(`\b([a-z0-9_]+(/[a-z0-9_]+)?\.go)\b`)

// TestPackageDocsListTheirFiles: the package docs that say which file
// holds what name every non-test file of the package, and only files that
// exist.
func TestPackageDocsListTheirFiles(t *testing.T) {
	for _, pkg := range packagesWithFileLists {
		doc := readFile(t, filepath.Join(pkg, "doc.go"))
		named := map[string]bool{}
		for _, m := range fileName.FindAllStringSubmatch(doc, -1) {
			named[m[1]] = true
		}
		for name := range named {
			if _, err := os.Stat(filepath.Join(root, pkg, name)); err != nil {
				t.Errorf("%s/doc.go names %s, which does not exist", pkg, name)
			}
		}
		files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			base := filepath.Base(f)
			if strings.HasSuffix(base, "_test.go") || base == "doc.go" {
				continue
			}
			if !named[base] {
				t.Errorf("%s/doc.go does not say what %s holds", pkg, base)
			}
		}
	}
}
