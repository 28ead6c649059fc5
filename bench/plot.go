package bench

import (
	"cmp"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot writes throughput.png (records/s against distinct keys) and
// memory.png (peak resident memory against distinct keys), one line per
// contender, into dir, and returns the files written.
func Plot(dir string, reports []Report) ([]string, error) {
	if len(reports) == 0 {
		return nil, fmt.Errorf("plot: no reports")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plot: %w", err)
	}
	reports = slices.Clone(reports)
	slices.SortFunc(reports, func(a, b Report) int { return cmp.Compare(a.Workload.Keys, b.Workload.Keys) })
	w := reports[0].Workload
	sub := fmt.Sprintf("%d partitions, %.0f%% duplicates, key %d B, value %d B, fp-rate %g",
		w.Partitions, 100*w.DupRatioActual(), w.KeySize, w.ValueSize, reports[0].FPRate)
	charts := []struct {
		file, title, ylabel string
		y                   func(Outcome) float64
	}{
		{"throughput.png", "dedup-bench: records/s", "records/s (thousands)", func(o Outcome) float64 { return o.RecordsPerSecond() / 1e3 }},
		{"memory.png", "dedup-bench: peak resident memory", "peak RSS (MiB)", func(o Outcome) float64 { return float64(o.PeakRSS) / (1 << 20) }},
	}
	var files []string
	for _, c := range charts {
		p := plot.New()
		p.Title.Text = c.title + "\n" + sub
		p.X.Label.Text = "distinct keys"
		p.Y.Label.Text = c.ylabel
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = true
		if len(reports) > 1 {
			p.X.Scale = plot.LogScale{}
		}
		p.X.Tick.Marker = keyTicks(reports)
		top := 0.0
		for _, name := range contenderOrder(reports) {
			i := slices.Index(AllContenders, name)
			var pts plotter.XYs
			for _, r := range reports {
				if o, ok := r.Outcome(name); ok {
					pts = append(pts, plotter.XY{X: float64(r.Workload.Keys), Y: c.y(o)})
					top = max(top, c.y(o))
				}
			}
			line, points, err := plotter.NewLinePoints(pts)
			if err != nil {
				return files, fmt.Errorf("plot %s: %w", c.file, err)
			}
			col := palette[i%len(palette)]
			line.Color, points.Color = col, col
			line.Width = vg.Points(2)
			points.Shape = shapes[i%len(shapes)]
			points.Radius = vg.Points(4)
			if name == StageCounting || name == StagePlain || name == StageFP {
				line.Width = vg.Points(3)
			}
			p.Add(line, points)
			p.Legend.Add(name, line, points)
		}
		// Head room above the highest point for the legend.
		p.Y.Max = top * 1.45
		if len(reports) == 1 {
			k := float64(reports[0].Workload.Keys)
			p.X.Min, p.X.Max = k*0.5, k*1.5
		} else {
			p.X.Min = float64(reports[0].Workload.Keys) / 1.3
			p.X.Max = float64(reports[len(reports)-1].Workload.Keys) * 1.3
		}
		file := filepath.Join(dir, c.file)
		if err := p.Save(8*vg.Inch, 5*vg.Inch, file); err != nil {
			return files, fmt.Errorf("plot %s: %w", c.file, err)
		}
		files = append(files, file)
	}
	return files, nil
}

var palette = []color.Color{
	color.RGBA{R: 0x77, G: 0x77, B: 0x77, A: 0xff}, // copy: grey
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // exact set: red
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // stage counting: blue
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // stage plain: green
	color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, // stage fingerprint: teal
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // boom: orange
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // cuckoo: purple
}

var shapes = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{},
	draw.PyramidGlyph{}, draw.CrossGlyph{}, draw.PlusGlyph{}, draw.RingGlyph{},
}

// contenderOrder lists the contenders present in reports in run order, so a
// contender keeps its colour from chart to chart.
func contenderOrder(reports []Report) []string {
	var names []string
	for _, n := range AllContenders {
		for _, r := range reports {
			if _, ok := r.Outcome(n); ok {
				names = append(names, n)
				break
			}
		}
	}
	return names
}

// keyTicks labels exactly the distinct-key counts that were run.
func keyTicks(reports []Report) plot.Ticker {
	var ticks plot.ConstantTicks
	for _, r := range reports {
		ticks = append(ticks, plot.Tick{Value: float64(r.Workload.Keys), Label: count(float64(r.Workload.Keys))})
	}
	return ticks
}
