package client

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/budget"
)

// retriesAtOnce runs `calls` executions at once through one retry instance built from a job's
// parameters, every attempt failing after `attempt`; it returns the most retries in flight at once
// and the calls that ended with the budget exceeded.
func retriesAtOnce(t *testing.T, values map[string]any, calls int, attempt time.Duration) (int32, int) {
	instance, err := failsafeRetry(values)
	if err != nil {
		t.Fatal(err)
	}
	var inFlight, most atomic.Int32
	var exceeded atomic.Int32
	var wg sync.WaitGroup
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := failsafe.With(instance.Policy).GetWithExecution(func(exec failsafe.Execution[any]) (any, error) {
				if exec.Attempts() > 1 { // a retry
					now := inFlight.Add(1)
					defer inFlight.Add(-1)
					for seen := most.Load(); now > seen && !most.CompareAndSwap(seen, now); seen = most.Load() {
					}
				}
				time.Sleep(attempt)
				return nil, errors.New("failed")
			})
			if errors.Is(err, budget.ErrExceeded) {
				exceeded.Add(1)
			}
		}()
	}
	wg.Wait()
	return most.Load(), int(exceeded.Load())
}

// failsafe-go's budget: a retry is refused once minConcurrency retries are in flight and they are
// more than maxRate of the executions in flight; below the floor it never refuses.
func TestARetryBudgetCapsTheRetriesInFlight(t *testing.T) {
	most, exceeded := retriesAtOnce(t, map[string]any{"maxAttempts": number("3"), "budgetMaxRate": number("0"),
		"budgetMinConcurrency": number("2")}, 8, 50*time.Millisecond)
	if most > 2 || exceeded == 0 {
		t.Errorf("a budget of no share and a floor of 2: %d retries at once (at most 2), %d calls refused a retry (some)",
			most, exceeded)
	}
	most, exceeded = retriesAtOnce(t, map[string]any{"maxAttempts": number("3")}, 8, 50*time.Millisecond)
	if most < 4 || exceeded != 0 {
		t.Errorf("no budget: %d retries at once (the 8 calls' at about once), %d refused (none)", most, exceeded)
	}
	// a rate of 100%: retries may be all of the executions, so none is refused
	most, exceeded = retriesAtOnce(t, map[string]any{"maxAttempts": number("3"), "budgetMaxRate": number("100"),
		"budgetMinConcurrency": number("0")}, 8, 50*time.Millisecond)
	if exceeded != 0 {
		t.Errorf("a budget of 100%%: %d calls refused a retry (none), %d at once", exceeded, most)
	}
}

func TestARetryBudgetJobIsRefusedOutOfBounds(t *testing.T) {
	for _, bad := range []map[string]any{{"budgetMaxRate": number("101")}, {"budgetMaxRate": number("-1")},
		{"budgetMinConcurrency": number("-1")}, {"budgetMinConcurrency": number("2147483648")}} {
		if _, err := failsafeRetry(bad); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
}
