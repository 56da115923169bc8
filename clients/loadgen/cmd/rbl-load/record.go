package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

var csvHeader = []string{"seq", "scheduled_ns", "sent_ns", "latency_ns", "status", "flags", "ok", "requests",
	"last_status", "error", "ending"}

// callReply is the part of a client service's /call (or /run) reply the records keep.
type callReply struct {
	Calls []struct {
		OK       *bool               `json:"ok"`
		Requests [][]json.RawMessage `json:"requests"`
		Rejected string              `json:"rejected"`
		TimedOut bool                `json:"timed_out"`
		Fallback bool                `json:"fallback"`
	} `json:"calls"`
}

// callFields gives ok, requests, last_status and how a library pattern ended the call ("rejected:KIND",
// "timed_out", "fallback" or empty) from a reply body; all empty when the body is not a JSON object
// with a non-empty "calls" array (a sidecar's or a plain server's reply).
func callFields(body []byte) (ok, requests, lastStatus, ending string) {
	if len(body) == 0 || body[0] != '{' {
		return "", "", "", "" // before reply is declared: it lives on the heap, allocated where declared
	}
	var reply callReply
	if json.Unmarshal(body, &reply) != nil || len(reply.Calls) == 0 {
		return "", "", "", ""
	}
	call := reply.Calls[0]
	switch {
	case call.Fallback:
		ending = "fallback"
	case call.TimedOut:
		ending = "timed_out"
	case call.Rejected != "":
		ending = "rejected:" + errorCleaner.Replace(call.Rejected)
	}
	if call.OK != nil {
		ok = "0"
		if *call.OK {
			ok = "1"
		}
	}
	requests = strconv.Itoa(len(call.Requests))
	if n := len(call.Requests); n > 0 && len(call.Requests[n-1]) >= 3 {
		var status *int64 // a null stays empty
		if json.Unmarshal(call.Requests[n-1][2], &status) == nil && status != nil {
			lastStatus = strconv.FormatInt(*status, 10)
		}
	}
	return ok, requests, lastStatus, ending
}

// recorder streams one CSV line per result and keeps only the lags (for the summary). A line is
// appended to a reused buffer and written to the buffered file: no allocation per request (the
// fewer the allocations, the rarer the garbage collector's pauses in the send times).
type recorder struct {
	out         *bufio.Writer
	offsets     []time.Duration
	start       time.Time
	flagsHeader string
	lags        []time.Duration
	lastEnd     time.Duration
	line        []byte
}

func newRecorder(out *bufio.Writer, offsets []time.Duration, start time.Time, flagsHeader string) (*recorder, error) {
	// the header's canonical name, once: Header.Get would make it again (allocating) per request
	r := &recorder{out: out, offsets: offsets, start: start, flagsHeader: http.CanonicalHeaderKey(flagsHeader),
		lags: make([]time.Duration, 0, min(len(offsets), 1<<20)), line: make([]byte, 0, 512)}
	_, err := out.WriteString(strings.Join(csvHeader, ",") + "\n")
	return r, err
}

var errorCleaner = strings.NewReplacer(",", "", "\n", " ", "\r", "")

func (r *recorder) add(res *vegeta.Result) error {
	if res.Seq >= uint64(len(r.offsets)) {
		return nil // cannot happen: the pacer stops after the last offset
	}
	scheduled := r.offsets[res.Seq]
	sent := res.Timestamp.Sub(r.start) // both carry the monotonic clock
	r.lags = append(r.lags, sent-scheduled)
	if end := sent + res.Latency; end > r.lastEnd {
		r.lastEnd = end
	}
	flags := ""
	if values := res.Headers[r.flagsHeader]; len(values) > 0 {
		flags = values[0]
	}
	ok, requests, lastStatus, ending := callFields(res.Body)
	line := strconv.AppendUint(r.line[:0], res.Seq, 10)
	line = strconv.AppendInt(append(line, ','), int64(scheduled), 10)
	line = strconv.AppendInt(append(line, ','), int64(sent), 10)
	line = strconv.AppendInt(append(line, ','), int64(res.Latency), 10)
	line = strconv.AppendUint(append(line, ','), uint64(res.Code), 10)
	line = appendField(append(line, ','), flags) // Envoy joins several flags with commas: quoted
	line = appendField(append(line, ','), ok)
	line = appendField(append(line, ','), requests)
	line = appendField(append(line, ','), lastStatus)
	line = appendField(append(line, ','), cleanError(res.Error))
	line = appendField(append(line, ','), ending)
	r.line = append(line, '\n')
	_, err := r.out.Write(r.line)
	return err
}

// cleanError: an error on one line, without commas (allocates only for an error that has them).
func cleanError(text string) string {
	if strings.ContainsAny(text, ",\n\r") {
		text = errorCleaner.Replace(text)
	}
	return strings.TrimSpace(text)
}

// appendField appends a CSV field, quoted (RFC 4180) when it holds a comma, a quote or a line break.
func appendField(line []byte, field string) []byte {
	if !strings.ContainsAny(field, ",\"\r\n") {
		return append(line, field...)
	}
	line = append(line, '"')
	for i := 0; i < len(field); i++ {
		if field[i] == '"' {
			line = append(line, '"')
		}
		line = append(line, field[i])
	}
	return append(line, '"')
}
