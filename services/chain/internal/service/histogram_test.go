package service

import (
	"testing"
	"time"
)

// A duration lands in the bucket whose bounds hold it, so a percentile read as a bound is within 10%.
func TestHistogramBucketsHoldTheirDurations(t *testing.T) {
	for _, d := range []time.Duration{time.Microsecond, 11 * time.Microsecond, 250 * time.Microsecond,
		3 * time.Millisecond, 47 * time.Millisecond, 2 * time.Second} {
		var h histogram
		h.add(d)
		snap := h.snapshot()
		if len(snap.Counts) != 1 {
			t.Fatalf("%v: %d buckets hold it", d, len(snap.Counts))
		}
		for key := range snap.Counts {
			var k int
			for _, c := range key {
				k = k*10 + int(c-'0')
			}
			ms := float64(d) / float64(time.Millisecond)
			if ms > boundMs(k)*1.000001 || (k > 0 && ms <= boundMs(k-1)) {
				t.Errorf("%v (%.4f ms) in bucket %d: (%.4f, %.4f]", d, ms, k, boundMs(k-1), boundMs(k))
			}
		}
	}
}

func TestHistogramKeepsTheLongestInTheLastBucket(t *testing.T) {
	var h histogram
	h.add(time.Hour)
	if h[histogramBuckets-1].Load() != 1 {
		t.Fatal("an hour is not in the last bucket")
	}
}

// The peak is the most calls in progress at once since the last read, which starts the next one.
func TestThePeakInFlightStartsAgainAtEachRead(t *testing.T) {
	var g peakGauge
	g.enter()
	g.enter()
	g.enter()
	g.leave()
	if got := g.read(); got != 3 {
		t.Fatalf("peak %d, want 3", got)
	}
	if got := g.read(); got != 2 {
		t.Fatalf("after a read the peak starts from the 2 in flight, got %d", got)
	}
	g.leave()
	g.leave()
	if got := g.read(); got != 2 {
		t.Fatalf("peak %d, want 2 (it was 2 before they left)", got)
	}
	if got := g.read(); got != 0 {
		t.Fatalf("peak %d, want 0", got)
	}
}
