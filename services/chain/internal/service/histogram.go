package service

// A latency histogram of fixed, logarithmic buckets, counted with atomics: cumulative like every
// counter here, so the runner takes the difference of two snapshots and reads percentiles from it.

import (
	"math"
	"strconv"
	"sync/atomic"
	"time"
)

// Bucket k holds durations in (bound(k-1), bound(k)]: bound(k) = 10 µs x 1.1^k, from 10 µs up to
// about 95 s in 170 buckets; the last also takes anything longer. 10% wide: a percentile read from
// it is within 10% of the true one.
const (
	histogramBuckets = 170
	histogramBase    = 10 * time.Microsecond
	histogramGrowth  = 1.1
)

var logGrowth = math.Log(histogramGrowth)

type histogram [histogramBuckets]atomic.Uint64

func (h *histogram) add(d time.Duration) {
	k := 0
	if d > histogramBase {
		k = int(math.Ceil(math.Log(float64(d)/float64(histogramBase)) / logGrowth))
	}
	h[min(k, histogramBuckets-1)].Add(1)
}

// snapshot is the counts, sparse, with what the buckets are.
func (h *histogram) snapshot() HistogramSnapshot {
	found := map[string]uint64{}
	for k := range h {
		if n := h[k].Load(); n > 0 {
			found[strconv.Itoa(k)] = n
		}
	}
	return HistogramSnapshot{BaseMs: float64(histogramBase) / float64(time.Millisecond), Growth: histogramGrowth,
		Counts: found}
}

// boundMs is bucket k's upper bound in milliseconds.
func boundMs(k int) float64 {
	return float64(histogramBase) * math.Pow(histogramGrowth, float64(k)) / float64(time.Millisecond)
}
