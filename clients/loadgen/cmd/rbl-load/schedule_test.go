package main

import (
	"strings"
	"testing"
	"time"
)

func TestPaceSendsNothingEarlyAndStopsAfterTheLast(t *testing.T) {
	offsets := []time.Duration{0, 2 * time.Millisecond, 2 * time.Millisecond, 7 * time.Millisecond}
	p := &schedulePacer{offsets: offsets, start: time.Now()}
	for i, due := range offsets {
		if wait, stop := p.Pace(0, uint64(i)); wait != 0 || stop {
			t.Fatalf("hit %d: Pace returned (%v, %v), want (0, false)", i, wait, stop)
		}
		if now := time.Since(p.start); now < due {
			t.Fatalf("hit %d released at %v, before it was due at %v", i, now, due)
		}
	}
	if _, stop := p.Pace(0, uint64(len(offsets))); !stop {
		t.Fatal("Pace did not stop after the last offset")
	}
}

func TestPaceAllocatesNothing(t *testing.T) {
	p := &schedulePacer{offsets: make([]time.Duration, 100), start: time.Now()}
	if allocs := testing.AllocsPerRun(100, func() { p.Pace(0, 5) }); allocs != 0 {
		t.Fatalf("Pace allocates %.1f times a hit, want 0", allocs)
	}
}

// The pacer sleeps: over 200 sends 0.5 ms apart it uses far less CPU than the 100 ms they span
// (a spin-wait, even of only the last 0.25 ms before a send, would use most of it).
func TestPaceSleepsRatherThanSpins(t *testing.T) {
	offsets := make([]time.Duration, 200)
	for i := range offsets {
		offsets[i] = time.Duration(i) * 500 * time.Microsecond
	}
	p := &schedulePacer{offsets: offsets, start: time.Now()}
	before := threadCPU(t)
	for i := range offsets {
		p.Pace(0, uint64(i))
	}
	if used := threadCPU(t) - before; used > 30*time.Millisecond {
		t.Fatalf("pacing 100 ms of sends used %v of CPU: it spins", used)
	}
}

func TestReadScheduleNamesTheBadLine(t *testing.T) {
	_, err := readSchedule(strings.NewReader("0\n5\n3\n"))
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("got %v, want an error naming line 3", err)
	}
}
