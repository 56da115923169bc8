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

// Pace waits itself until hit number `hits` is due and returns 0: vegeta would sleep the returned
// duration with Go's timer, which wakes ~1 ms late for short waits (the runtime's poller counts in
// milliseconds), then hands the hit to a worker at once.
//
// It sleeps, never spins: a nanosleep system call with this thread's timer slack set to 1 ns
// wakes ~0.03-0.06 ms after the due time here (the default 50 us slack doubled that). A spin of
// the last 0.25 ms before each send (what rbl-load did before) kept the p50 lag at ~0.005 ms but
// cost 1.2-1.8x the CPU per request at 1,000-4,000/s, taken from the cores the system under test
// shares, and did not shorten the p99 lag, which the garbage collector and the machine's other
// work decide (bench/loadgen_peers.py; docs/benchmarks.md).
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
		if left <= 0 {
			return 0, false // due now, or late already: the record shows any lag
		}
		sleepPrecisely(left)
	}
}

// sleepPrecisely blocks this thread (only: Go's scheduler runs the workers on others) for d. An
// early return (EINTR: Go's preemption signals) just goes round the caller's loop again. The
// slack is set on whichever thread runs this: a thread's setting, kept by it (a cheap call).
func sleepPrecisely(d time.Duration) {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
	pause := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&pause, nil)
}

const prSetTimerSlack = 29 // PR_SET_TIMERSLACK (linux/prctl.h)

// Rate is the scheduled number of sends in the second before elapsed (vegeta only reports it).
func (p *schedulePacer) Rate(elapsed time.Duration) float64 {
	to := sort.Search(len(p.offsets), func(i int) bool { return p.offsets[i] > elapsed })
	from := sort.Search(len(p.offsets), func(i int) bool { return p.offsets[i] > elapsed-time.Second })
	return float64(to - from)
}
