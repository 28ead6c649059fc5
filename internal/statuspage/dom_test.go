package statuspage

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"dedup/internal/testkit"
)

// TestMain refuses kafka.DefaultTransport (testkit.Run), for the stage
// the browser test runs.
func TestMain(m *testing.M) { os.Exit(testkit.Run(m)) }

// element is one element of a parsed page: its name, attributes and the
// text inside it.
type element struct {
	Name string
	Attr map[string]string
	Text string
}

// dom is a page's elements in document order.
type dom []*element

// parseDOM reads HTML as browsers serialise it (every attribute quoted,
// every element closed but the void ones).
func parseDOM(t testing.TB, page string) dom {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict, d.AutoClose, d.Entity = false, xml.HTMLAutoClose, xml.HTMLEntity
	var out dom
	var open []*element
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("parse the page: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := &element{Name: strings.ToLower(tok.Name.Local), Attr: map[string]string{}}
			for _, a := range tok.Attr {
				name := a.Name.Local
				if a.Name.Space != "" {
					name = a.Name.Space + ":" + name
				}
				e.Attr[strings.ToLower(name)] = a.Value
			}
			out = append(out, e)
			open = append(open, e)
		case xml.EndElement:
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		case xml.CharData:
			for _, e := range open {
				e.Text += string(tok)
			}
		}
	}
}

// byID is the element with id, or nil.
func (d dom) byID(id string) *element {
	for _, e := range d {
		if e.Attr["id"] == id {
			return e
		}
	}
	return nil
}

// all are the elements named name.
func (d dom) all(name string) []*element {
	var out []*element
	for _, e := range d {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// withAttr are the elements that have attribute name.
func (d dom) withAttr(name string) []*element {
	var out []*element
	for _, e := range d {
		if _, ok := e.Attr[name]; ok {
			out = append(out, e)
		}
	}
	return out
}

// scrape is one /metrics text: its samples.
type scrape []scraped

type scraped struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	labelRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// parseScrape reads the Prometheus text format.
func parseScrape(t testing.TB, text string) scrape {
	t.Helper()
	var out scrape
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not a sample line: %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, scraped{name: m[1], labels: labels(m[2]), value: v})
	}
	return out
}

func labels(s string) map[string]string {
	out := map[string]string{}
	for _, m := range labelRE.FindAllStringSubmatch(s, -1) {
		out[m[1]] = strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n").Replace(m[2])
	}
	return out
}

// sum adds the samples of family name whose labels hold every pair of
// the selector's matchers (name="value",...); has says there was one.
func (s scrape) sum(name, matchers string) (total float64, has bool) {
	want := labels(matchers)
next:
	for _, x := range s {
		if x.name != name {
			continue
		}
		for k, v := range want {
			if x.labels[k] != v {
				continue next
			}
		}
		total += x.value
		has = true
	}
	return total, has
}

func getMetrics(t testing.TB, url string) scrape {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return parseScrape(t, string(body))
}

// figureErrors compares every figure of d (an element with data-metric)
// with the sum of its series in s: the value it carries and the text it
// shows. An empty list: the page shows what s holds.
func figureErrors(d dom, s scrape) []string {
	var errs []string
	for _, e := range d.withAttr("data-metric") {
		id, name, matchers := e.Attr["id"], e.Attr["data-metric"], e.Attr["data-match"]
		want, has := s.sum(name, matchers)
		raw, shown := e.Attr["data-value"]
		if !shown {
			if has {
				errs = append(errs, id+": shows no value, /metrics has "+strconv.FormatFloat(want, 'g', -1, 64))
			}
			continue
		}
		got, err := strconv.ParseFloat(raw, 64)
		switch {
		case err != nil:
			errs = append(errs, id+": data-value "+raw+": "+err.Error())
		case !has:
			errs = append(errs, id+": shows "+raw+", /metrics has no "+name+"{"+matchers+"}")
		case !near(got, want, 1e-9):
			errs = append(errs, id+": shows "+raw+", /metrics has "+strconv.FormatFloat(want, 'g', -1, 64))
		}
		if msg := textError(e, got); msg != "" {
			errs = append(errs, id+": "+msg)
		}
	}
	return errs
}

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*max(1, math.Abs(b)) }

// number is the first decimal number in s, digit groups joined.
var number = regexp.MustCompile(`-?[0-9][0-9\x{202f}]*(?:\.[0-9]+)?(?:e[-+][0-9]+)?`)

// textError says how e's text fails to show v as its data-format says.
func textError(e *element, v float64) string {
	text := strings.TrimSpace(e.Text)
	parse := func() (float64, bool) {
		n, err := strconv.ParseFloat(strings.ReplaceAll(number.FindString(text), "\u202f", ""), 64)
		return n, err == nil
	}
	switch f := e.Attr["data-format"]; f {
	case formatCount, formatOffset:
		if n, ok := parse(); !ok || n != math.Round(v) {
			return "text " + strconv.Quote(text) + " is not " + strconv.FormatFloat(math.Round(v), 'f', 0, 64)
		}
	case formatPercent:
		if n, ok := parse(); !ok || !strings.HasSuffix(text, "%") || math.Abs(n-100*v) > 0.05+1e-9 {
			return "text " + strconv.Quote(text) + " is not " + strconv.FormatFloat(100*v, 'f', -1, 64) + "%"
		}
	case formatFloat:
		if n, ok := parse(); !ok || math.Abs(n-v) > 0.005*math.Abs(v)+1e-300 {
			return "text " + strconv.Quote(text) + " is not " + strconv.FormatFloat(v, 'g', 3, 64)
		}
	case formatBytes:
		if text != bytesText(v) {
			return "text " + strconv.Quote(text) + " is not " + bytesText(v)
		}
	case formatSpan:
		if text != ageText(seconds(v)) {
			return "text " + strconv.Quote(text) + " is not " + ageText(seconds(v))
		}
	case formatAge:
		if !strings.HasSuffix(text, " ago") && !(v <= 0 && text == "never") {
			return "text " + strconv.Quote(text) + " is not an age"
		}
	case formatState:
	default:
		return "unknown data-format " + strconv.Quote(f)
	}
	return ""
}
