package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"io"
	"net/http"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func TestALineIsWrittenWithoutAllocating(t *testing.T) {
	start := time.Now()
	rec, err := newRecorder(bufio.NewWriter(io.Discard), make([]time.Duration, 1000), start, "x-rbl-response-flags")
	if err != nil {
		t.Fatal(err)
	}
	res := &vegeta.Result{Seq: 7, Code: 200, Timestamp: start.Add(time.Millisecond), Latency: 3 * time.Millisecond,
		Headers: http.Header{"X-Rbl-Response-Flags": []string{"UO,URX"}}, Body: []byte("fine")}
	allocs := testing.AllocsPerRun(100, func() {
		rec.lags = rec.lags[:0]
		if err := rec.add(res); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("recorder.add allocates %.1f times a request, want 0", allocs)
	}
}

func TestLinesReadBackAsTheCSVTheyStandFor(t *testing.T) {
	var file bytes.Buffer
	out := bufio.NewWriter(&file)
	start := time.Now()
	rec, err := newRecorder(out, []time.Duration{0, 5 * time.Millisecond}, start, "x-rbl-response-flags")
	if err != nil {
		t.Fatal(err)
	}
	results := []*vegeta.Result{
		{Seq: 0, Code: 503, Timestamp: start.Add(20 * time.Microsecond), Latency: time.Millisecond,
			Headers: http.Header{"X-Rbl-Response-Flags": []string{`UO,"odd"`}}},
		{Seq: 1, Timestamp: start.Add(5 * time.Millisecond), Error: " Get \"x\": dial tcp, refused\nagain "},
	}
	for _, res := range results {
		if err := rec.add(res); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Flush(); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&file).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{csvHeader,
		{"0", "0", "20000", "1000000", "503", `UO,"odd"`, "", "", "", "", ""},
		{"1", "5000000", "5000000", "0", "0", "", "", "", "", `Get "x": dial tcp refused again`, ""}}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows, want %d: %q", len(rows), len(want), rows)
	}
	for i := range want {
		if !equal(rows[i], want[i]) {
			t.Errorf("row %d: got %q, want %q", i, rows[i], want[i])
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
