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

func TestATraceActivatesUsersByItsFactorLinearlyBetweenPoints(t *testing.T) {
	p := newPopulationPacer(10, time.Second, time.Hour, 1, 10, time.Now())
	p.trace = []tracePoint{{0, 0.2}, {10 * time.Second, 1}, {20 * time.Second, 0}}
	for _, c := range []struct {
		at   time.Duration
		want int
	}{{0, 2}, {5 * time.Second, 6}, {10 * time.Second, 10}, {15 * time.Second, 5}, {time.Hour, 0}} {
		if got := p.activeUsers(c.at); got != c.want {
			t.Fatalf("at %v: %d active users, want %d", c.at, got, c.want)
		}
	}
}

func TestAnInactiveUserWaitsUntilTheTraceLetsItSend(t *testing.T) {
	p := newPopulationPacer(2, 0, time.Second, 1, 10, time.Now())
	p.trace = []tracePoint{{0, 0.5}, {200 * time.Millisecond, 0.5}, {200*time.Millisecond + 1, 1}}
	var users []int32
	for hit := uint64(0); hit < 2; hit++ {
		if _, stop := p.Pace(0, hit); stop {
			t.Fatal("stopped early")
		}
		users = append(users, p.user[hit])
		if hit == 0 {
			p.done(0, time.Since(p.start))
		}
	}
	if users[0] != 0 || users[1] != 0 {
		t.Fatalf("users %v sent first: user 1 may not send while only half of 2 are active", users)
	}
	if _, stop := p.Pace(0, 2); stop || p.user[2] != 1 || time.Since(p.start) < 200*time.Millisecond {
		t.Fatalf("user %d sent at %v: user 1 sends once the trace lets both", p.user[2], time.Since(p.start))
	}
}
