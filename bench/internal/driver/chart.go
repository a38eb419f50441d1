package driver

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"strconv"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// BarChart is a horizontal grouped bar chart: one group of bars per workload (label on the
// left), one bar per series (colour in the legend), the value written after each bar, an
// optional vertical reference line (e.g. parity at 1) and an optional target mark per
// group. Rendered with the standard library and basicfont, so charts need nothing but Go.
type BarChart struct {
	Title  string
	Axis   string // what the axis measures, under it
	Series []string
	Groups []BarGroup
	Ref    float64 // a vertical reference line at this value; 0 for none
	Log    bool    // logarithmic axis (values must be > 0)
	Width  int     // pixels; default 960
	// Format writes a bar's value; default %.3g.
	Format func(float64) string
}

// BarGroup is one group: a value per series (≤ 0 or NaN: not measured, drawn as "n/a")
// and an optional target (0 for none), drawn as a red mark across the group.
type BarGroup struct {
	Label  string
	Values []float64
	Target float64
}

// Chart geometry, in pixels.
const (
	chartLabelW = 250 // group labels
	chartRightW = 90  // room for value labels after the longest bar
	chartBarH   = 16
	chartBarGap = 3
	chartGroupG = 16
	chartTop    = 34 // title
	chartLegend = 20 // per legend row
	chartBottom = 46 // axis ticks and axis label
)

// chartColors are the series colours (colour-blind-safe Okabe-Ito palette).
var chartColors = []color.RGBA{
	{0, 114, 178, 255},   // blue
	{230, 159, 0, 255},   // orange
	{0, 158, 115, 255},   // green
	{204, 121, 167, 255}, // purple
	{86, 180, 233, 255},  // sky
	{213, 94, 0, 255},    // vermillion
}

var (
	chartInk    = color.RGBA{30, 30, 30, 255}
	chartGrid   = color.RGBA{225, 225, 225, 255}
	chartRef    = color.RGBA{90, 90, 90, 255}
	chartTarget = color.RGBA{200, 0, 0, 255}
)

// scale maps values to x positions in [x0, x1].
type scale struct {
	lo, hi float64
	log    bool
	x0, x1 int
}

func (c BarChart) scale(x0, x1 int) scale {
	lo, hi := math.Inf(1), 0.0
	consider := func(v float64) {
		if v > 0 && !math.IsNaN(v) && !math.IsInf(v, 0) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	consider(c.Ref)
	for _, g := range c.Groups {
		consider(g.Target)
		for _, v := range g.Values {
			consider(v)
		}
	}
	if hi == 0 {
		lo, hi = 1, 1
	}
	if c.Log {
		return scale{lo: math.Pow(10, math.Floor(math.Log10(lo))), hi: math.Pow(10, math.Ceil(math.Log10(hi*1.0001))), log: true, x0: x0, x1: x1}
	}
	return scale{lo: 0, hi: niceCeil(hi * 1.05), x0: x0, x1: x1}
}

// x is the pixel position of v.
func (s scale) x(v float64) int {
	var f float64
	if s.log {
		f = (math.Log10(v) - math.Log10(s.lo)) / (math.Log10(s.hi) - math.Log10(s.lo))
	} else {
		f = v / s.hi
	}
	f = max(0, min(1, f))
	return s.x0 + int(math.Round(f*float64(s.x1-s.x0)))
}

// ticks are the axis labels: every decade (log) or five steps (linear).
func (s scale) ticks() []float64 {
	var t []float64
	if s.log {
		for v := s.lo; v <= s.hi*1.0001; v *= 10 {
			t = append(t, v)
		}
		return t
	}
	for i := 0; i <= 5; i++ {
		t = append(t, s.hi*float64(i)/5)
	}
	return t
}

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// Size is the image size the chart renders to.
func (c BarChart) Size() (w, h int) {
	w = c.Width
	if w <= 0 {
		w = 960
	}
	n := max(1, len(c.Series))
	h = chartTop + chartLegend*c.legendRows(w) + chartBottom
	for range c.Groups {
		h += n*chartBarH + (n-1)*chartBarGap + chartGroupG
	}
	return w, h
}

func (c BarChart) legendRows(w int) int {
	rows, x := 1, chartLabelW
	for _, s := range c.Series {
		sw := 20 + textWidth(s) + 24
		if x+sw > w && x > chartLabelW {
			rows, x = rows+1, chartLabelW
		}
		x += sw
	}
	return rows
}

// Render draws the chart.
func (c BarChart) Render() *image.RGBA {
	w, h := c.Size()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	format := c.Format
	if format == nil {
		format = func(v float64) string { return fmt.Sprintf("%.3g", v) }
	}
	drawText(img, 10, 22, c.Title, chartInk)

	// Legend.
	x, y := chartLabelW, chartTop
	for i, s := range c.Series {
		sw := 20 + textWidth(s) + 24
		if x+sw > w && x > chartLabelW {
			x, y = chartLabelW, y+chartLegend
		}
		fill(img, x, y+2, x+14, y+14, chartColors[i%len(chartColors)])
		drawText(img, x+20, y+12, s, chartInk)
		x += sw
	}
	top := chartTop + chartLegend*c.legendRows(w)
	bottom := h - chartBottom
	sc := c.scale(chartLabelW, w-chartRightW)

	// Grid and axis.
	for _, t := range sc.ticks() {
		tx := sc.x(t)
		fill(img, tx, top, tx+1, bottom, chartGrid)
		label := strconv.FormatFloat(t, 'f', -1, 64)
		drawText(img, tx-textWidth(label)/2, bottom+16, label, chartInk)
	}
	fill(img, chartLabelW, bottom, w-chartRightW+1, bottom+1, chartInk)
	drawText(img, chartLabelW+(w-chartRightW-chartLabelW-textWidth(c.Axis))/2, bottom+36, c.Axis, chartInk)

	// Bars.
	n := max(1, len(c.Series))
	gy := top + chartGroupG/2
	for _, g := range c.Groups {
		gh := n*chartBarH + (n-1)*chartBarGap
		drawText(img, 10, gy+gh/2+5, clip(g.Label, (chartLabelW-20)/7), chartInk)
		if g.Target > 0 { // behind the bars, standing out above and below the group
			tx := sc.x(g.Target)
			fill(img, tx-1, gy-6, tx+2, gy+gh+6, chartTarget)
		}
		for i := range n {
			by := gy + i*(chartBarH+chartBarGap)
			v := math.NaN()
			if i < len(g.Values) {
				v = g.Values[i]
			}
			if !(v > 0) || math.IsInf(v, 0) {
				drawText(img, chartLabelW+4, by+12, "n/a", chartRef)
				continue
			}
			bx := sc.x(v)
			fill(img, chartLabelW, by, max(bx, chartLabelW+1), by+chartBarH, chartColors[i%len(chartColors)])
			label := format(v)
			fill(img, bx+2, by+1, bx+6+textWidth(label), by+chartBarH-1, color.RGBA{255, 255, 255, 255})
			drawText(img, bx+4, by+12, label, chartInk)
		}
		gy += gh + chartGroupG
	}
	if c.Ref > 0 {
		rx := sc.x(c.Ref)
		for yy := top; yy < bottom; yy += 6 {
			fill(img, rx, yy, rx+1, min(yy+3, bottom), chartRef)
		}
	}
	return img
}

// WritePNG renders the chart as a PNG.
func (c BarChart) WritePNG(w io.Writer) error { return png.Encode(w, c.Render()) }

func fill(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	draw.Draw(img, image.Rect(x0, y0, x1, y1), image.NewUniform(c), image.Point{}, draw.Src)
}

func drawText(img *image.RGBA, x, y int, s string, c color.RGBA) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func textWidth(s string) int { return font.MeasureString(basicfont.Face7x13, s).Round() }

// clip shortens s to n characters (basicfont is monospaced).
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-2]) + ".."
}
