package client

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/failsafe-go/failsafe-go"
)

// refusedShare runs `calls` executions through a throttler built from a job's parameters, every
// `failEvery`-th failing (0: none), and returns the share it refused.
func refusedShare(t *testing.T, values map[string]any, calls, failEvery int) float64 {
	instance, err := failsafeAdaptiveThrottler(values)
	if err != nil {
		t.Fatal(err)
	}
	refused, executed := 0, 0
	for range calls {
		_, err := failsafe.With(instance.Policy).Get(func() (any, error) {
			executed++
			if failEvery > 0 && executed%failEvery == 0 {
				return nil, errors.New("failed")
			}
			return "ok", nil
		})
		if refusalKind(err) == "rate_limiter" {
			refused++
		}
	}
	return float64(refused) / float64(calls)
}

// Google SRE client-side throttling as failsafe-go implements it: refusals in proportion to the
// failures beyond the threshold, (executions - successes / (1 - threshold)) / (executions + 1),
// capped at maxRejectionRate; none while failures stay within the threshold.
func TestTheAdaptiveThrottlerRefusesInProportionToFailures(t *testing.T) {
	cases := []struct {
		threshold, failEvery int
		want                 float64
	}{
		{10, 0, 0},            // no failures
		{50, 2, 0},            // half fail, as the threshold allows
		{10, 2, 1 - 0.5/0.9},  // half fail: 0.444 of the calls refused
		{10, 1, 0.9},          // every execution fails: the cap
		{20, 4, 1 - 0.75/0.8}, // a quarter fail: 0.0625
	}
	for _, c := range cases {
		got := refusedShare(t, map[string]any{"failureRateThreshold": number(strconv.Itoa(c.threshold))}, 4000, c.failEvery)
		if math.Abs(got-c.want) > 0.04 {
			t.Errorf("threshold %d%%, one in %d failing: refused %.3f, want %.3f", c.threshold, c.failEvery, got, c.want)
		}
	}
}

func TestAnAdaptiveThrottlerJobIsRefusedWhereTheLibraryWouldFail(t *testing.T) {
	for _, bad := range []map[string]any{
		{"thresholdingPeriod": number("0.5")},
		{"failureRateThreshold": number("101")},
		{"maxRejectionRate": number("-1")},
	} {
		if _, err := failsafeAdaptiveThrottler(bad); err == nil {
			t.Errorf("%v: built, the job should be refused", bad)
		}
	}
}
