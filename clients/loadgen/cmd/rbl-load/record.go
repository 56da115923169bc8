package main

import (
	"encoding/csv"
	"encoding/json"
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
	var reply callReply
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &reply) != nil || len(reply.Calls) == 0 {
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

// recorder streams one CSV line per result and keeps only the lags (for the summary).
type recorder struct {
	out         *csv.Writer
	offsets     []time.Duration
	start       time.Time
	flagsHeader string
	lags        []time.Duration
	lastEnd     time.Duration
	row         []string
}

func newRecorder(out *csv.Writer, offsets []time.Duration, start time.Time, flagsHeader string) (*recorder, error) {
	r := &recorder{out: out, offsets: offsets, start: start, flagsHeader: flagsHeader,
		lags: make([]time.Duration, 0, len(offsets)), row: make([]string, len(csvHeader))}
	return r, out.Write(csvHeader)
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
	if res.Headers != nil {
		flags = res.Headers.Get(r.flagsHeader)
	}
	ok, requests, lastStatus, ending := callFields(res.Body)
	row := r.row
	row[0] = strconv.FormatUint(res.Seq, 10)
	row[1] = strconv.FormatInt(int64(scheduled), 10)
	row[2] = strconv.FormatInt(int64(sent), 10)
	row[3] = strconv.FormatInt(int64(res.Latency), 10)
	row[4] = strconv.Itoa(int(res.Code))
	row[5] = flags // Envoy joins several flags with commas: csv quotes the field
	row[6], row[7], row[8] = ok, requests, lastStatus
	row[9] = strings.TrimSpace(errorCleaner.Replace(res.Error))
	row[10] = ending
	return r.out.Write(row)
}
