// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Metrics is one scrape of a Prometheus text endpoint: every sample, by
// metric name. It reads counters and gauges; histogram buckets come through
// as samples of <name>_bucket.
type Metrics map[string][]Sample

// Sample is one line of the exposition: its labels and value.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Sum adds the samples of name whose labels include every pair of match;
// a metric that is absent sums to zero.
func (m Metrics) Sum(name string, match map[string]string) float64 {
	var total float64
	for _, s := range m[name] {
		ok := true
		for k, v := range match {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += s.Value
		}
	}
	return total
}

// ScrapeMetrics fetches and parses a Prometheus text endpoint.
func ScrapeMetrics(ctx context.Context, url string) (Metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	// Plain text: the parser below reads the classic format, and asking for
	// it keeps the server from answering in protobuf or OpenMetrics.
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics reads the Prometheus text exposition format (version 0.0.4).
func ParseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, labels, rest, err := splitSample(line)
		if err != nil {
			return nil, err
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		v, err := parseValue(fields[0])
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		m[name] = append(m[name], Sample{Labels: labels, Value: v})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return m, nil
}

func parseValue(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

// splitSample splits `name{k="v",...} value` into its parts; label values
// may hold escaped quotes, commas and braces.
func splitSample(line string) (name string, labels map[string]string, rest string, err error) {
	i := strings.IndexAny(line, "{ \t")
	if i < 0 {
		return "", nil, "", fmt.Errorf("metrics line %q: no value", line)
	}
	name, line = line[:i], line[i:]
	labels = map[string]string{}
	if line[0] != '{' {
		return name, labels, line, nil
	}
	line = line[1:]
	for {
		line = strings.TrimLeft(line, " ,")
		if line == "" {
			return "", nil, "", fmt.Errorf("metrics sample %s: unterminated labels", name)
		}
		if line[0] == '}' {
			return name, labels, line[1:], nil
		}
		eq := strings.IndexByte(line, '=')
		if eq < 0 || eq+1 >= len(line) || line[eq+1] != '"' {
			return "", nil, "", fmt.Errorf("metrics sample %s: malformed label", name)
		}
		key := strings.TrimSpace(line[:eq])
		line = line[eq+2:]
		var val strings.Builder
		closed := false
		for j := 0; j < len(line); j++ {
			c := line[j]
			if c == '\\' && j+1 < len(line) {
				j++
				switch line[j] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(line[j])
				}
				continue
			}
			if c == '"' {
				line = line[j+1:]
				closed = true
				break
			}
			val.WriteByte(c)
		}
		if !closed {
			return "", nil, "", fmt.Errorf("metrics sample %s: unterminated label value", name)
		}
		labels[key] = val.String()
	}
}
