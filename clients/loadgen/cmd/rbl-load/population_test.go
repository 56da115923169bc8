package main

import (
	"testing"
	"time"
)

func TestAUserSendsOnlyAfterItsThinkAndAgainOnlyAfterItsAnswer(t *testing.T) {
	p := newPopulationPacer(1, 5*time.Millisecond, time.Second, 7, 100, time.Now())
	if _, stop := p.Pace(0, 0); stop {
		t.Fatal("the only user never sent")
	}
	if sent := time.Since(p.start); sent < p.due[0] {
		t.Fatalf("sent at %v, before its think ended at %v", sent, p.due[0])
	}
	released := make(chan time.Duration, 1)
	go func() { p.Pace(0, 1); released <- time.Since(p.start) }()
	select {
	case <-released:
		t.Fatal("the user sent again before its answer came")
	case <-time.After(50 * time.Millisecond):
	}
	answered := time.Since(p.start)
	p.done(0, answered)
	at := <-released
	if at < answered || p.due[1] < answered || at < p.due[1] {
		t.Fatalf("second send at %v (due %v), its answer at %v: it must think after the answer", at, p.due[1], answered)
	}
}

func TestThinkTimesAreExponentialWithTheirMeanAndSeeded(t *testing.T) {
	a := newPopulationPacer(1, 100*time.Millisecond, time.Second, 3, 1, time.Now())
	b := newPopulationPacer(1, 100*time.Millisecond, time.Second, 3, 1, time.Now())
	var sum time.Duration
	const n = 20000
	for i := 0; i < n; i++ {
		x, y := a.thinkTime(0), b.thinkTime(0)
		if x != y {
			t.Fatalf("draw %d: %v and %v from the same seed", i, x, y)
		}
		sum += x
	}
	if mean := sum / n; mean < 97*time.Millisecond || mean > 103*time.Millisecond {
		t.Fatalf("mean think %v, want 100ms within 3%%", mean)
	}
}

func TestThePopulationStopsAtItsDurationAndWhenStopped(t *testing.T) {
	p := newPopulationPacer(3, time.Hour, 30*time.Millisecond, 1, 10, time.Now())
	if _, stop := p.Pace(0, 0); !stop || time.Since(p.start) < 30*time.Millisecond {
		t.Fatal("users thinking for an hour must stop the round at its duration, not before")
	}
	q := newPopulationPacer(3, time.Hour, time.Hour, 1, 10, time.Now())
	go func() { time.Sleep(10 * time.Millisecond); q.stop() }()
	if _, stop := q.Pace(0, 0); !stop {
		t.Fatal("a stopped population kept waiting")
	}
	r := newPopulationPacer(3, 0, time.Hour, 1, 2, time.Now())
	if _, stop := r.Pace(0, 2); !stop {
		t.Fatal("the records' bound did not stop the population")
	}
}
