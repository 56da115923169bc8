package main

import (
	"bufio"
	"container/heap"
	"fmt"
	"io"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"time"
)

// populationPacer is a vegeta Pacer for a closed population of users, as HTTPMon runs them: each
// user thinks (an exponential time of mean `think`), sends one request, waits for its answer (or
// the timeout), and thinks again, until the round's duration is up. A user's first think starts
// at the round's start, so the users do not all send at once.
//
// Pace hands out the next user whose think is over; done() puts a user back when its answer
// comes. The send time each request was due at is kept by its hit number, for the records.
//
// With a trace (points of seconds and a factor, linear between them), only the first
// round(users x factor(t)) users are active at time t: a user whose think ends while it is not
// waits, looking again every traceRecheck, as HTTPMon's scenario adds and removes users.
type populationPacer struct {
	start    time.Time
	duration time.Duration
	think    time.Duration
	thinkers []*rand.Rand // one seeded stream per user: a user's thinks do not depend on the others'
	trace    []tracePoint // none: every user is active throughout

	mu      sync.Mutex
	ready   readyHeap     // users whose next send is due at .due
	wake    chan struct{} // a user was put back
	stopped chan struct{} // closed on SIGTERM/SIGINT: a waiting Pace returns at once

	// By hit number, written by Pace before vegeta hands the hit to a worker (so before its
	// result reaches done() or the recorder); never grown, so never moved while read.
	due  []time.Duration
	user []int32
}

const traceRecheck = 50 * time.Millisecond

type tracePoint struct {
	at     time.Duration
	factor float64
}

// activeUsers: how many of `users` the trace lets send at t (all of them without a trace).
func (p *populationPacer) activeUsers(t time.Duration) int {
	users := len(p.thinkers)
	if len(p.trace) == 0 {
		return users
	}
	factor := p.trace[len(p.trace)-1].factor
	if t <= p.trace[0].at {
		factor = p.trace[0].factor
	} else {
		for i := 1; i < len(p.trace); i++ {
			if t <= p.trace[i].at {
				a, b := p.trace[i-1], p.trace[i]
				factor = a.factor + (b.factor-a.factor)*float64(t-a.at)/float64(b.at-a.at)
				break
			}
		}
	}
	return min(users, int(float64(users)*factor+0.5))
}

type readyUser struct {
	due  time.Duration
	user int32
}

type readyHeap []readyUser

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(readyUser)) }
func (h *readyHeap) Pop() any {
	old := *h
	last := old[len(old)-1]
	*h = old[:len(old)-1]
	return last
}

func newPopulationPacer(users int, think, duration time.Duration, seed int64, maxRequests int,
	start time.Time) *populationPacer {
	p := &populationPacer{start: start, duration: duration, think: think, wake: make(chan struct{}, 1),
		stopped: make(chan struct{}), due: make([]time.Duration, maxRequests), user: make([]int32, maxRequests)}
	for i := 0; i < users; i++ {
		p.thinkers = append(p.thinkers, rand.New(rand.NewSource(seed+int64(i)*7919)))
		heap.Push(&p.ready, readyUser{p.thinkTime(i), int32(i)})
	}
	return p
}

func (p *populationPacer) thinkTime(user int) time.Duration {
	return time.Duration(p.thinkers[user].ExpFloat64() * float64(p.think))
}

// Pace waits until a user's think is over and returns 0 to send its request now; true once the
// duration is up (or the pacer is stopped, or hits reached the records' bound).
func (p *populationPacer) Pace(_ time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= uint64(len(p.due)) {
		return 0, true
	}
	for {
		now := time.Since(p.start)
		if now >= p.duration {
			return 0, true
		}
		wait := p.duration - now
		p.mu.Lock()
		if len(p.ready) > 0 && p.ready[0].due <= now {
			next := heap.Pop(&p.ready).(readyUser)
			if int(next.user) >= p.activeUsers(now) { // not one of the trace's users now: wait
				heap.Push(&p.ready, readyUser{now + traceRecheck, next.user})
				p.mu.Unlock()
				continue
			}
			p.due[hits], p.user[hits] = next.due, next.user
			p.mu.Unlock()
			return 0, false
		}
		if len(p.ready) > 0 {
			wait = min(wait, p.ready[0].due-now)
		}
		p.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-p.wake:
		case <-p.stopped:
			timer.Stop()
			return 0, true
		}
		timer.Stop()
	}
}

// done puts the user of hit `seq` back: it thinks from the moment its answer ended.
func (p *populationPacer) done(seq uint64, ended time.Duration) {
	if seq >= uint64(len(p.due)) {
		return
	}
	user := int(p.user[seq])
	p.mu.Lock()
	heap.Push(&p.ready, readyUser{ended + p.thinkTime(user), int32(user)})
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

func (p *populationPacer) stop() {
	select {
	case <-p.stopped:
	default:
		close(p.stopped)
	}
}

// Rate: the pacer's rate is whatever the users' answers and thinks make it (vegeta only reports it).
func (p *populationPacer) Rate(time.Duration) float64 { return 0 }

// readTrace reads a trace file: a line `seconds,factor` per point, times increasing (rbl writes it
// from the plan, which the compiler checked).
func readTrace(r io.Reader) ([]tracePoint, error) {
	var points []tracePoint
	scanner := bufio.NewScanner(r)
	for line := 1; scanner.Scan(); line++ {
		seconds, factor, found := strings.Cut(strings.TrimSpace(scanner.Text()), ",")
		s, err1 := strconv.ParseFloat(seconds, 64)
		f, err2 := strconv.ParseFloat(factor, 64)
		at := time.Duration(s * float64(time.Second))
		switch {
		case !found || err1 != nil || err2 != nil || s < 0 || f < 0:
			return nil, fmt.Errorf("line %d: %q is not `seconds,factor`", line, scanner.Text())
		case len(points) > 0 && at <= points[len(points)-1].at:
			return nil, fmt.Errorf("line %d: the times must increase", line)
		}
		points = append(points, tracePoint{at, f})
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	if len(points) == 0 {
		return nil, fmt.Errorf("no points")
	}
	return points, nil
}
