package main

import (
	"bufio"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// readSchedule reads one send offset per line (integer nanoseconds from the start of the attack,
// non-decreasing). Errors name the 1-based line so a runner's bug is easy to find.
func readSchedule(r io.Reader) ([]time.Duration, error) {
	var offsets []time.Duration
	scanner := bufio.NewScanner(r)
	line := 0
	for scanner.Scan() {
		line++
		text := strings.TrimSpace(scanner.Text())
		n, err := strconv.ParseInt(text, 10, 64)
		switch {
		case err != nil:
			return nil, fmt.Errorf("line %d: %q is not an integer number of nanoseconds", line, text)
		case n < 0:
			return nil, fmt.Errorf("line %d: offset %d is negative", line, n)
		case len(offsets) > 0 && time.Duration(n) < offsets[len(offsets)-1]:
			return nil, fmt.Errorf("line %d: offset %d is earlier than the line before (%d); offsets must not decrease",
				line, n, offsets[len(offsets)-1])
		}
		offsets = append(offsets, time.Duration(n))
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %v", line+1, err)
	}
	if len(offsets) == 0 {
		return nil, fmt.Errorf("no send offsets (the file is empty)")
	}
	return offsets, nil
}

// schedulePacer is a vegeta Pacer that sends hit i at start + offsets[i].
//
// It counts time from its own start instant rather than from the elapsed time vegeta passes in:
// vegeta's attack start is private, and the CSV's sent_ns (Result.Timestamp - start) must count
// from the very instant the offsets count from. start is taken just before Attack is called, so
// every hit is due at or after the instant vegeta's loop begins.
type schedulePacer struct {
	offsets []time.Duration
	start   time.Time
}

// spinWindow: the last stretch before a send is busy-waited, not slept. Go's own timers wake up
// ~1 ms late for sub-millisecond sleeps here (and ~0.2 ms for longer ones), which alone would make
// sends late by that much; a plain nanosleep system call wakes up ~0.06 ms late (p99 ~0.2 ms on a
// busy machine). So the pacer nanosleeps until spinWindow before a send and spins the rest: up to
// this much CPU per send.
const spinWindow = 250 * time.Microsecond

// Pace waits itself until hit number `hits` is due and returns 0: vegeta would sleep the returned
// duration with Go's coarse timer, then hands the hit to a worker at once.
func (p *schedulePacer) Pace(_ time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= uint64(len(p.offsets)) {
		return 0, true
	}
	due := p.offsets[hits]
	// vegeta just handed the previous hit to a worker, which waits to run on this thread: let it
	// start (and take its timestamp) now, rather than after our nanosleep, when another thread
	// would have to steal it, late on a busy machine
	runtime.Gosched()
	for {
		left := due - time.Since(p.start)
		switch {
		case left <= 0:
			return 0, false // due now, or late already: the record shows any lag
		case left > spinWindow:
			// blocks this thread only; Go's scheduler runs the workers on others. An early return
			// (EINTR: Go's preemption signals) just goes round again.
			pause := syscall.NsecToTimespec(int64(left - spinWindow))
			_ = syscall.Nanosleep(&pause, nil)
		default:
			runtime.Gosched() // lets the workers run on this thread while we wait
		}
	}
}

// Rate is the scheduled number of sends in the second before elapsed (vegeta only reports it).
func (p *schedulePacer) Rate(elapsed time.Duration) float64 {
	to := sort.Search(len(p.offsets), func(i int) bool { return p.offsets[i] > elapsed })
	from := sort.Search(len(p.offsets), func(i int) bool { return p.offsets[i] > elapsed-time.Second })
	return float64(to - from)
}
