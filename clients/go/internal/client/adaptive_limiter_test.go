package client

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
)

// drive keeps `workers` executions going through the limiter for `span`, each taking `latency` (read
// afresh per execution); a refused one waits a millisecond and tries again.
func drive(limiter failsafe.Policy[any], workers int, span time.Duration, latency *atomic.Int64) {
	deadline := time.Now().Add(span)
	var group sync.WaitGroup
	for range workers {
		group.Add(1)
		go func() {
			defer group.Done()
			for time.Now().Before(deadline) {
				_, err := failsafe.With(limiter).Get(func() (any, error) {
					time.Sleep(time.Duration(latency.Load()))
					return nil, nil
				})
				if err != nil {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	group.Wait()
}

func number(text string) json.Number { return json.Number(text) }

// lowest samples limiter.Limit() every 2 ms until stop is closed, and returns the lowest it saw.
func lowest(limiter adaptivelimiter.AdaptiveLimiter[any], stop <-chan struct{}) <-chan int {
	out := make(chan int, 1)
	go func() {
		low := limiter.Limit()
		for {
			select {
			case <-stop:
				out <- low
				return
			case <-time.After(2 * time.Millisecond):
				low = min(low, limiter.Limit())
			}
		}
	}()
	return out
}

// The library's own limiter, built from a job's parameters: its limit holds while execution times
// hold, and falls when they jump (tenfold), as failsafe-go documents; a bulkhead of the same size
// would hold. (The baseline then follows the new times and the limit recovers: the fall is what is
// checked, not where it settles.)
func TestTheAdaptiveLimiterLowersItsLimitWhenExecutionTimesRise(t *testing.T) {
	instance, err := failsafeAdaptiveLimiter(map[string]any{
		"minLimit": number("1"), "maxLimit": number("16"), "initialLimit": number("16"),
		"recentWindowMin": number("20"), "recentWindowMinSamples": number("5"),
	})
	if err != nil {
		t.Fatal(err)
	}
	limiter := instance.Policy.(adaptivelimiter.AdaptiveLimiter[any])
	var latency atomic.Int64
	latency.Store(int64(5 * time.Millisecond))
	drive(instance.Policy, 32, 1500*time.Millisecond, &latency)
	steady := limiter.Limit()
	latency.Store(int64(50 * time.Millisecond))
	stop := make(chan struct{})
	low := lowest(limiter, stop)
	drive(instance.Policy, 32, 1500*time.Millisecond, &latency)
	close(stop)
	fell := <-low
	if steady < 12 {
		t.Fatalf("the limit fell to %d of 16 while execution times held at 5 ms", steady)
	}
	if fell > steady-3 {
		t.Fatalf("the limit went from %d no lower than %d while execution times rose tenfold: it should fall",
			steady, fell)
	}
}

func TestAnAdaptiveLimiterJobIsRefusedWhereTheBuilderWouldPanic(t *testing.T) {
	for _, bad := range []map[string]any{
		{"minLimit": number("5"), "initialLimit": number("2")},
		{"initialLimit": number("300")},
		{"recentWindowMin": number("100"), "recentWindowMax": number("50")},
		{"recentQuantile": number("1")},
		{"recentQuantile": number("0")},
		{"initialRejectionFactor": number("2")},
		{"initialRejectionFactor": number("3"), "maxRejectionFactor": number("2")},
		{"maxLimitFactor": number("0.5")},
	} {
		if _, err := failsafeAdaptiveLimiter(bad); err == nil {
			t.Errorf("%v: built, the job should be refused", bad)
		}
	}
	if _, err := failsafeAdaptiveLimiter(map[string]any{"initialRejectionFactor": number("2"),
		"maxRejectionFactor": number("3"), "maxWaitTime": number("50")}); err != nil {
		t.Errorf("queueing with both factors: %v", err)
	}
}
