package verbs

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// ChartSeries is one bar colour of the chart.
type ChartSeries struct {
	Name   string
	Color  string
	Values map[string]float64 // row -> value (ms)
}

// WriteChartSVG draws a horizontal grouped bar chart, one group per row
// (in order) and one bar per series, with the value printed after each
// bar. Plain SVG 1.1, no scripts, no external resources.
func WriteChartSVG(w io.Writer, title, unit string, rows []string, series []ChartSeries) error {
	const (
		width   = 960
		labelW  = 210
		valueW  = 90
		barH    = 14
		gap     = 10
		top     = 64
		leftPad = 10
	)
	maxV := 0.0
	for _, s := range series {
		for _, r := range rows {
			if v := s.Values[r]; v > maxV && !math.IsInf(v, 0) && !math.IsNaN(v) {
				maxV = v
			}
		}
	}
	if maxV <= 0 {
		maxV = 1
	}
	plotW := float64(width - labelW - valueW - leftPad)
	groupH := len(series)*barH + gap
	height := top + len(rows)*groupH + 40
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="13" font-weight="bold">%s</text>`+"\n", leftPad, html.EscapeString(title))
	lx := leftPad
	for _, s := range series {
		fmt.Fprintf(&b, `<rect x="%d" y="34" width="12" height="12" fill="%s"/><text x="%d" y="45">%s</text>`+"\n",
			lx, html.EscapeString(s.Color), lx+16, html.EscapeString(s.Name))
		lx += 24 + 8*len(s.Name) + 20
	}
	for i, r := range rows {
		y := top + i*groupH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n",
			labelW-6, y+len(series)*barH/2+4, html.EscapeString(r))
		for j, s := range series {
			v := s.Values[r]
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				v = 0
			}
			bw := v / maxV * plotW
			by := y + j*barH
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n",
				labelW, by, bw, barH-2, html.EscapeString(s.Color))
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#333">%.2f %s</text>`+"\n",
				float64(labelW)+bw+4, by+barH-4, v, html.EscapeString(unit))
		}
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>`+"\n", labelW, top-4, labelW, top+len(rows)*groupH-gap)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
