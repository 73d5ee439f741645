package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// clientColors are the bar colours, in the order of clients, so a client
// keeps its colour in a run that measures only some of them.
var clientColors = []string{"#7f7f7f", "#bcbd22", "#8c564b", "#1f77b4", "#ff7f0e", "#2ca02c", "#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#98df8a"}

func colorOf(name string) string {
	if i := slices.IndexFunc(clients, func(cl client) bool { return cl.name == name }); i >= 0 && i < len(clientColors) {
		return clientColors[i]
	}
	return "#000000"
}

// groups returns the cells and the client names rows cover, in the order
// of their first appearance (summarise's order).
func groups(rows []row) ([]cell, []string) {
	var cs []cell
	var names []string
	for _, r := range rows {
		if !slices.Contains(cs, r.Cell) {
			cs = append(cs, r.Cell)
		}
		if !slices.Contains(names, r.Client) {
			names = append(names, r.Client)
		}
	}
	return cs, names
}

// writeSVG draws two panels of grouped bars, one group per cell and one bar
// per client: the median p50 latency and the median calls/s, each on a
// log scale (the clients differ by orders of magnitude). Each bar is
// labelled with its value; note (when, what, how many runs) goes under
// the title.
func writeSVG(w io.Writer, rows []row, title, note string) error {
	const (
		width   = 960
		panelH  = 300
		top     = 90
		gap     = 70
		left    = 70
		right   = 20
		bottomH = 40
	)
	height := top + 2*panelH + gap + bottomH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", left, esc(title))
	fmt.Fprintf(&b, `<text x="%d" y="40" fill="#555">%s</text>`+"\n", left, esc(note))
	// Legend.
	_, names := groups(rows)
	for i, name := range names {
		x := left + i*130
		fmt.Fprintf(&b, `<rect x="%d" y="50" width="14" height="14" fill="%s"/><text x="%d" y="62">%s</text>`+"\n", x, colorOf(name), x+20, esc(name))
	}
	panel(&b, rows, "p50 latency, µs (log scale; lower is better)", func(r row) float64 { return r.P50us.Median }, left, top, width-left-right, panelH)
	panel(&b, rows, "calls/s (log scale; higher is better)", func(r row) float64 { return r.CallsPerS.Median }, left, top+panelH+gap, width-left-right, panelH)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// panel draws one metric's grouped bars in the box at (x, y) of size w×h,
// whose bottom 20 pixels hold the cell labels.
func panel(b *strings.Builder, rows []row, title string, metric func(row) float64, x, y, w, h int) {
	plotH := h - 20
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		if v := metric(r); r.Runs > 0 && v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x, y-8, esc(title))
	if math.IsInf(lo, 1) {
		fmt.Fprintf(b, `<text x="%d" y="%d">no data</text>`+"\n", x+10, y+plotH/2)
		return
	}
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	yOf := func(v float64) float64 {
		return float64(y+plotH) - (math.Log10(v)-dlo)/(dhi-dlo)*float64(plotH)
	}
	// Decade grid lines and labels.
	for d := dlo; d <= dhi; d++ {
		gy := yOf(math.Pow(10, d))
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", x, gy, x+w, gy)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x-6, gy+4, esc(decade(d)))
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", x, y+plotH, x+w, y+plotH)
	cs, names := groups(rows)
	groupW := float64(w) / float64(len(cs))
	barW := groupW * 0.8 / float64(len(names))
	for ci, c := range cs {
		gx := float64(x) + float64(ci)*groupW + groupW*0.1
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", gx+groupW*0.4, y+plotH+16, esc(c.String()))
		for k, name := range names {
			bx := gx + float64(k)*barW
			var r row
			for _, rr := range rows {
				if rr.Cell == c && rr.Client == name {
					r = rr
				}
			}
			v := metric(r)
			if r.Runs == 0 || v <= 0 {
				fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="red">×</text>`+"\n", bx+barW/2, y+plotH-4)
				continue
			}
			by := yOf(v)
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %s: %s</title></rect>`+"\n",
				bx+1, by, barW-2, float64(y+plotH)-by, colorOf(name), esc(name), esc(c.String()), num(v))
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n", bx+barW/2, by-3, esc(num(v)))
		}
	}
}

// decade labels 10^d compactly: 1, 10, 100, 1k, 10k, ...
func decade(d float64) string {
	v := math.Pow(10, d)
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

func esc(s string) string { return html.EscapeString(s) }
