// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"strings"
	"time"
	"unicode"
)

// causeColor gives each cause a colour that tells it from the others at a
// glance: the wasteful causes warm, the cheap ones cool and grey.
var causeColor = map[Cause]string{
	HotLoop:      "#d62728",
	Fight:        "#9467bd",
	RequeuePoll:  "#ff7f0e",
	Resync:       "#8c564b",
	Heartbeat:    "#e377c2",
	Relist:       "#bcbd22",
	InitialList:  "#17becf",
	LeaseRenewal: "#1f77b4",
	WatchRestart: "#2ca02c",
	Unexplained:  "#7f7f7f",
}

// Plot bounds: the worst plotLanes clients, and at most plotMarks marks per
// lane, so that a log of many clients and streams still draws a file a
// browser opens.
const (
	plotLanes = 100
	plotMarks = 2000
)

// Plot sizes, in SVG units.
const (
	plotLabel = 330
	plotWidth = 1100
	plotLane  = 26
	plotTop   = 40
)

// WritePlot draws rep as SVG: one lane per client, worst at the top, one
// mark per kept request time, coloured by its stream's cause, on a time
// axis; a legend at the bottom. Each stream contributes its latest
// Limits.Times requests, so a long log shows its end. Past plotLanes
// clients and plotMarks marks in a lane, the rest is left out and the
// title says so.
func WritePlot(w io.Writer, rep Report) error {
	bw := bufio.NewWriter(w)
	clients := rep.Clients[:min(len(rep.Clients), plotLanes)]
	lanes := len(clients)
	height := plotTop + lanes*plotLane + 70
	from, to := rep.From, rep.To
	span := to.Sub(from)
	if span <= 0 {
		span = time.Second
	}
	x := func(t time.Time) float64 {
		return plotLabel + float64(t.Sub(from))/float64(span)*float64(plotWidth-plotLabel-20)
	}
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", plotWidth, height)
	title := fmt.Sprintf("API requests per client, %s to %s (UTC)", from.Format(time.RFC3339), to.Format(time.RFC3339))
	if lanes < len(rep.Clients) {
		title += fmt.Sprintf("; the worst %d of %d clients", lanes, len(rep.Clients))
	}
	fmt.Fprintf(bw, `<text x="10" y="20" font-size="14">%s</text>`+"\n", title)
	// The time axis: five ticks, as offsets from the start.
	axisY := plotTop + lanes*plotLane + 5
	fmt.Fprintf(bw, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#000"/>`+"\n", plotLabel, axisY, plotWidth-20, axisY)
	for i := 0; i <= 4; i++ {
		t := from.Add(span * time.Duration(i) / 4)
		fmt.Fprintf(bw, `<text x="%.1f" y="%d" text-anchor="middle">+%s</text>`+"\n", x(t), axisY+16, round(t.Sub(from)))
	}
	for i, c := range clients {
		y := plotTop + i*plotLane
		if i%2 == 0 {
			fmt.Fprintf(bw, `<rect x="0" y="%d" width="%d" height="%d" fill="#f4f4f4"/>`+"\n", y, plotWidth, plotLane)
		}
		label := fmt.Sprintf("%s (%s) %.0f/h", c.Name, c.User, c.PerHour)
		fmt.Fprintf(bw, `<text x="5" y="%d"><title>%s</title>%s</text>`+"\n", y+17, svgText(label), svgText(shorten(label, 52)))
		marks := 0
		for _, s := range c.Streams {
			color := causeColor[s.Cause]
			for _, t := range s.Times {
				if marks++; marks > plotMarks {
					break
				}
				fmt.Fprintf(bw, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="1.5"/>`+"\n", x(t), y+4, x(t), y+plotLane-4, color)
			}
		}
	}
	lx := 10
	ly := axisY + 40
	for _, cause := range Causes {
		fmt.Fprintf(bw, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly-9, causeColor[cause], lx+14, ly, cause)
		lx += 20 + 8*len(cause)
	}
	fmt.Fprintln(bw, `</svg>`)
	return bw.Flush()
}

// svgText escapes s for SVG text: the XML specials, and the controls XML
// does not allow.
func svgText(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return '?'
		}
		return r
	}, s)
	return html.EscapeString(s)
}

// shorten cuts s to n runes, with "..." when cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}
