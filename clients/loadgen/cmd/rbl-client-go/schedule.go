package main

import (
	"bufio"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strconv"
	"strings"
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

// spinWindow: the last stretch before a send is busy-waited, not slept. Go's timers on Linux wake up
// to ~1 ms late for short sleeps (and ~0.2 ms for longer ones), which alone would make every send
// late by about that much; spinning costs up to this much CPU per send (a core at >1000 sends/s).
const spinWindow = time.Millisecond

// Pace waits itself until hit number `hits` is due and returns 0: vegeta sleeps the returned
// duration with the same coarse timer, then hands the hit to a worker at once.
func (p *schedulePacer) Pace(_ time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= uint64(len(p.offsets)) {
		return 0, true
	}
	due := p.offsets[hits]
	if wait := due - time.Since(p.start); wait > 2*spinWindow {
		time.Sleep(wait - spinWindow)
	}
	for time.Since(p.start) < due {
		runtime.Gosched() // lets the workers run on this thread while we wait
	}
	return 0, false // late already or due now: the record shows any lag
}

// Rate is the scheduled number of sends in the second before elapsed (vegeta only reports it).
func (p *schedulePacer) Rate(elapsed time.Duration) float64 {
	to := sort.Search(len(p.offsets), func(i int) bool { return p.offsets[i] > elapsed })
	from := sort.Search(len(p.offsets), func(i int) bool { return p.offsets[i] > elapsed-time.Second })
	return float64(to - from)
}
