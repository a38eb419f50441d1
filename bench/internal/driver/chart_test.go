package driver

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"testing"
)

// barLength measures the bar of colour c on row y: its first and last pixel of that colour.
func barLength(img image.Image, y int, c [3]uint32) (from, to int) {
	from, to = -1, -1
	b := img.Bounds()
	for x := b.Min.X; x < b.Max.X; x++ {
		r, g, bl, _ := img.At(x, y).RGBA()
		if r>>8 == c[0] && g>>8 == c[1] && bl>>8 == c[2] {
			if from < 0 {
				from = x
			}
			to = x
		}
	}
	return from, to
}

func renderDecode(t *testing.T, c BarChart) image.Image {
	t.Helper()
	var buf bytes.Buffer
	if err := c.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w, h := c.Size()
	if img.Bounds().Dx() != w || img.Bounds().Dy() != h {
		t.Fatalf("image is %v, Size says %dx%d", img.Bounds(), w, h)
	}
	return img
}

// barY is the middle row of series i's bar in group g.
func barY(c BarChart, g, i int) int {
	w, _ := c.Size()
	n := len(c.Series)
	top := chartTop + chartLegend*c.legendRows(w) + chartGroupG/2
	gy := top + g*(n*chartBarH+(n-1)*chartBarGap+chartGroupG)
	return gy + i*(chartBarH+chartBarGap) + chartBarH/2
}

func colorOf(i int) [3]uint32 {
	c := chartColors[i]
	return [3]uint32{uint32(c.R), uint32(c.G), uint32(c.B)}
}

// TestBarChartLinear checks that bars are drawn from the axis with lengths in proportion
// to their values, in the series' colours.
func TestBarChartLinear(t *testing.T) {
	c := BarChart{Title: "t", Series: []string{"a", "b"}, Groups: []BarGroup{{Label: "g1", Values: []float64{1, 2}, Target: 1.5}, {Label: "g2", Values: []float64{4, 0}}}}
	img := renderDecode(t, c)
	if w, h := c.Size(); w != 960 || h < 100 {
		t.Fatalf("size %dx%d", w, h)
	}
	lengths := map[float64]int{}
	for _, bar := range []struct {
		g, i int
		v    float64
	}{{0, 0, 1}, {0, 1, 2}, {1, 0, 4}} {
		from, to := barLength(img, barY(c, bar.g, bar.i), colorOf(bar.i))
		if from != chartLabelW {
			t.Fatalf("bar %v starts at x=%d, want %d", bar, from, chartLabelW)
		}
		lengths[bar.v] = to - from + 1
	}
	for _, v := range []float64{2, 4} {
		if r := float64(lengths[v]) / float64(lengths[1]); math.Abs(r-v) > 0.05*v {
			t.Errorf("bar of %v is %.2f× the bar of 1, want %v (lengths %v)", v, r, v, lengths)
		}
	}
	// The missing value draws no bar.
	if from, _ := barLength(img, barY(c, 1, 1), colorOf(1)); from >= 0 {
		t.Errorf("a bar for a missing value at x=%d", from)
	}
}

// TestBarChartLog checks the log axis: equal ratios make equal steps.
func TestBarChartLog(t *testing.T) {
	c := BarChart{Series: []string{"a"}, Log: true, Ref: 1, Groups: []BarGroup{
		{Label: "x", Values: []float64{0.1}}, {Label: "y", Values: []float64{1}}, {Label: "z", Values: []float64{10}}}}
	img := renderDecode(t, c)
	var ends []int
	for g := range 3 {
		_, to := barLength(img, barY(c, g, 0), colorOf(0))
		ends = append(ends, to)
	}
	if d1, d2 := ends[1]-ends[0], ends[2]-ends[1]; d1 <= 0 || math.Abs(float64(d1-d2)) > 2 {
		t.Errorf("log bars end at %v: steps %d and %d, want equal", ends, d1, d2)
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0.7: 1, 1.3: 2, 2.2: 2.5, 3: 5, 7: 10, 130: 200} {
		if got := niceCeil(in); math.Abs(got-want) > 1e-9 {
			t.Errorf("niceCeil(%v) = %v, want %v", in, got, want)
		}
	}
}
