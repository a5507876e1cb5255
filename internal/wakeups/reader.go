// Copyright The Vidra Authors.
// SPDX-License-Identifier: Apache-2.0

package wakeups

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
)

// Bounds of the reader, whatever the log holds.
const (
	// DefaultMaxLine bounds one line: an Event at level RequestResponse
	// carries its objects, at most about 3 MiB each in etcd; a longer line
	// is skipped and counted.
	DefaultMaxLine = 8 << 20
	// DefaultDedupeWindow is how many recent requests the stage
	// deduplication remembers: the stages of one request are written
	// within moments of each other, so a window of this many requests
	// (about 10 MB) finds them.
	DefaultDedupeWindow = 1 << 18
)

// Coverage says what the reader read and could not use, so that a clean
// result is never a blind one.
type Coverage struct {
	Files int   `json:"files"`
	Lines int64 `json:"lines"`
	Bytes int64 `json:"bytes"`
	// Malformed lines are not JSON audit Events; TooLong ones exceeded
	// the line bound. Both are skipped.
	Malformed int64 `json:"malformed"`
	TooLong   int64 `json:"tooLong"`
	// Stages counts the events of each stage read.
	Stages map[string]int64 `json:"stages"`
	// Requests is how many requests were passed on: one per auditID.
	Requests int64 `json:"requests"`
	// Deduplicated counts the events of a request already passed on (its
	// later stages, or the same line in two files).
	Deduplicated int64 `json:"deduplicated"`
	// OnlyReceived counts requests seen at RequestReceived and at no later
	// stage: the policy omits the later ones, the log was cut, or the
	// request never finished. They are not analysed.
	OnlyReceived int64 `json:"onlyReceived"`
}

// Reader reads audit Events from several logs, one after the other, and
// returns each request once.
type Reader struct {
	// MaxLine and DedupeWindow default to DefaultMaxLine and
	// DefaultDedupeWindow.
	MaxLine      int
	DedupeWindow int

	cov     Coverage
	seen    map[uint64]uint8
	ring    []uint64
	next    int
	ev      event
	longBuf []byte
}

// Bits of Reader.seen.
const (
	seenReceived uint8 = 1 << iota
	seenEmitted
)

// Coverage returns what was read so far. Call it after the last Read to
// count the requests that never went past RequestReceived.
func (r *Reader) Coverage() Coverage {
	c := r.cov
	c.Stages = make(map[string]int64, len(r.cov.Stages))
	for k, v := range r.cov.Stages {
		c.Stages[k] = v
	}
	for _, s := range r.seen {
		if s == seenReceived {
			c.OnlyReceived++
		}
	}
	return c
}

// Read reads one log to its end and calls emit for each request not seen
// before. A gzip stream is detected by its magic number. It returns an
// error only when src cannot be read; bad lines are counted instead.
func (r *Reader) Read(src io.Reader, emit func(Request)) error {
	if r.MaxLine <= 0 {
		r.MaxLine = DefaultMaxLine
	}
	if r.DedupeWindow <= 0 {
		r.DedupeWindow = DefaultDedupeWindow
	}
	if r.seen == nil {
		r.seen = make(map[uint64]uint8, r.DedupeWindow)
		r.ring = make([]uint64, 0, r.DedupeWindow)
		r.cov.Stages = map[string]int64{}
	}
	r.cov.Files++
	br := bufio.NewReaderSize(src, 256<<10)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		defer gz.Close()
		br = bufio.NewReaderSize(gz, 256<<10)
	}
	for {
		line, err := r.readLine(br)
		if len(line) > 0 {
			r.line(line, emit)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine returns the next line, without its newline; a line over MaxLine
// is read to its end, counted, and returned empty.
func (r *Reader) readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	r.cov.Bytes += int64(len(line))
	if !errors.Is(err, bufio.ErrBufferFull) {
		if len(line) > 0 || err == nil {
			r.cov.Lines++
		}
		if len(line) > r.MaxLine {
			r.cov.TooLong++
			return nil, err
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
	// A long line: gather it, up to MaxLine, in a buffer of our own.
	r.longBuf = append(r.longBuf[:0], line...)
	tooLong := false
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = br.ReadSlice('\n')
		r.cov.Bytes += int64(len(line))
		if !tooLong && len(r.longBuf)+len(line) > r.MaxLine {
			tooLong = true
			r.longBuf = r.longBuf[:0]
		}
		if !tooLong {
			r.longBuf = append(r.longBuf, line...)
		}
	}
	r.cov.Lines++
	if tooLong {
		r.cov.TooLong++
		// Give the memory back: one hostile line must not keep it.
		r.longBuf = nil
		return nil, err
	}
	return bytes.TrimRight(r.longBuf, "\r\n"), err
}

// line decodes one line and passes its request on once.
func (r *Reader) line(line []byte, emit func(Request)) {
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if err := decode(line, &r.ev); err != nil {
		r.cov.Malformed++
		return
	}
	r.cov.Stages[clipStage(r.ev.Stage)]++
	h := fnv.New64a()
	_, _ = h.Write([]byte(r.ev.AuditID))
	id := h.Sum64()
	s, known := r.seen[id]
	if !known {
		r.remember(id)
	}
	switch r.ev.Stage {
	case StageRequestReceived:
		if s&seenReceived != 0 {
			r.cov.Deduplicated++
		}
		r.seen[id] = s | seenReceived
	case StageResponseStarted, StageResponseComplete, StagePanic:
		// A watch is counted when it starts streaming: a watch that stays
		// open is one request however long it lasts, and its
		// ResponseComplete comes minutes later.
		if s&seenEmitted != 0 {
			r.cov.Deduplicated++
			return
		}
		r.seen[id] = s | seenEmitted
		r.cov.Requests++
		emit(r.ev.request())
	default:
		r.cov.Malformed++
	}
}

// remember adds id to the window, forgetting the oldest when it is full.
func (r *Reader) remember(id uint64) {
	if len(r.ring) < r.DedupeWindow {
		r.ring = append(r.ring, id)
		return
	}
	old := r.ring[r.next]
	if r.seen[old] == seenReceived {
		r.cov.OnlyReceived++
	}
	delete(r.seen, old)
	r.ring[r.next] = id
	r.next = (r.next + 1) % r.DedupeWindow
}

// clipStage keeps the stage names the API server writes, so that a hostile
// log cannot grow Coverage.Stages.
func clipStage(s string) string {
	switch s {
	case StageRequestReceived, StageResponseStarted, StageResponseComplete, StagePanic:
		return s
	}
	return "other"
}
