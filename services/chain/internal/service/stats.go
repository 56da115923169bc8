package service

// The counters GET /rbl/stats reports: monotonic, so the runner takes the difference of two
// snapshots. Atomics on the request path; a mutex only around a call's response flags.

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// statusCounts counts by HTTP status; index 0 is a transport error (no status at all).
type statusCounts [1000]atomic.Uint64

func (c *statusCounts) add(status int) {
	if status < 0 || status >= len(c) {
		status = 0
	}
	c[status].Add(1)
}

func (c *statusCounts) snapshot() map[string]uint64 {
	found := map[string]uint64{}
	for status := range c {
		if n := c[status].Load(); n > 0 {
			found[strconv.Itoa(status)] = n
		}
	}
	return found
}

// callStats are one called service's: requests sent, their statuses, the sidecar's flags on them.
type callStats struct {
	sent      atomic.Uint64
	statuses  statusCounts
	succeeded histogram // the response times of the calls answered 2xx
	// calls in progress: a caller's sidecar has at most that many requests of them in flight, so its
	// pool limit refuses only when this reached the limit
	inFlight peakGauge
	mu       sync.Mutex
	flags    map[string]uint64
}

// addFlags counts each of a reply's Envoy response flags ("UO", or "URX,UF" for two).
func (c *callStats) addFlags(flags string) {
	c.mu.Lock()
	for _, flag := range strings.Split(flags, ",") {
		if flag = strings.TrimSpace(flag); flag != "" && flag != "-" {
			c.flags[flag]++
		}
	}
	c.mu.Unlock()
}

// Stats are one replica's counters since it started.
type Stats struct {
	requests   atomic.Uint64
	answered   statusCounts
	workOK     atomic.Int64 // nanoseconds of work on requests answered 2xx
	workFailed atomic.Int64 // ... and on the others: the work wasted
	calls      map[string]*callStats
	// the service's own faults (PUT /rbl/fault) as it injected them: the realised rate is measured here
	abortsInjected atomic.Uint64
	delaysInjected atomic.Uint64
	cgroupRoot     string // where its container's cgroup is seen ("": not read)
}

// peakGauge counts what is in progress and the most at once since it was last read.
type peakGauge struct {
	now  atomic.Int64
	peak atomic.Int64
}

func (g *peakGauge) enter() {
	now := g.now.Add(1)
	for {
		seen := g.peak.Load()
		if now <= seen || g.peak.CompareAndSwap(seen, now) {
			return
		}
	}
}

func (g *peakGauge) leave() { g.now.Add(-1) }

// read is the peak since the last read; the next one starts from what is in progress now.
func (g *peakGauge) read() int64 { return g.peak.Swap(g.now.Load()) }

func newStats(called []string) *Stats {
	s := &Stats{calls: map[string]*callStats{}}
	for _, service := range called {
		if s.calls[service] == nil {
			s.calls[service] = &callStats{flags: map[string]uint64{}}
		}
	}
	return s
}

func (s *Stats) answer(status int, work time.Duration) {
	s.answered.add(status)
	if work <= 0 {
		return
	}
	if status >= 200 && status < 300 {
		s.workOK.Add(int64(work))
	} else {
		s.workFailed.Add(int64(work))
	}
}

// Snapshot is GET /rbl/stats's body.
type Snapshot struct {
	Service     string                  `json:"service"`
	Replica     int                     `json:"replica"`
	Requests    uint64                  `json:"requests"`
	Answered    map[string]uint64       `json:"answered"`
	WorkSeconds WorkSeconds             `json:"work_seconds"`
	CPUSeconds  CPUSeconds              `json:"cpu_seconds"`
	Calls       map[string]CallSnapshot `json:"calls"`
	Faults      FaultCounts             `json:"faults"`
}

// FaultCounts are the requests this service aborted or delayed itself.
type FaultCounts struct {
	Aborts uint64 `json:"aborts"`
	Delays uint64 `json:"delays"`
}

type WorkSeconds struct {
	OK     float64 `json:"ok"`
	Failed float64 `json:"failed"`
}

type CPUSeconds struct {
	User   float64 `json:"user"`
	System float64 `json:"system"`
	// its cgroup's, as the container engine accounts it (with --cgroup-cpu, where readable)
	Cgroup *float64 `json:"cgroup,omitempty"`
}

type CallSnapshot struct {
	Sent     uint64            `json:"sent"`
	Statuses map[string]uint64 `json:"statuses"`
	Flags    map[string]uint64 `json:"flags"`
	Success  HistogramSnapshot `json:"success_ms"` // the response times of the calls answered 2xx
	// the most calls in progress at once since the previous snapshot (not cumulative: each snapshot
	// starts the next peak from the calls in progress then)
	PeakInFlight int64 `json:"peak_in_flight"`
}

// HistogramSnapshot says what its buckets are: bucket k holds (base x growth^(k-1), base x growth^k] ms.
type HistogramSnapshot struct {
	BaseMs float64           `json:"base_ms"`
	Growth float64           `json:"growth"`
	Counts map[string]uint64 `json:"counts"` // bucket index -> count, for the buckets that hold any
}

func (s *Stats) snapshot(service string, replica int) Snapshot {
	snap := Snapshot{
		Service:  service,
		Replica:  replica,
		Requests: s.requests.Load(),
		Answered: s.answered.snapshot(),
		WorkSeconds: WorkSeconds{OK: time.Duration(s.workOK.Load()).Seconds(),
			Failed: time.Duration(s.workFailed.Load()).Seconds()},
		CPUSeconds: cpuSeconds(s.cgroupRoot),
		Calls:      map[string]CallSnapshot{},
		Faults:     FaultCounts{Aborts: s.abortsInjected.Load(), Delays: s.delaysInjected.Load()},
	}
	for name, c := range s.calls {
		c.mu.Lock()
		flags := make(map[string]uint64, len(c.flags))
		for flag, n := range c.flags {
			flags[flag] = n
		}
		c.mu.Unlock()
		snap.Calls[name] = CallSnapshot{Sent: c.sent.Load(), Statuses: c.statuses.snapshot(), Flags: flags,
			Success: c.succeeded.snapshot(), PeakInFlight: c.inFlight.read()}
	}
	return snap
}

// cpuSeconds is the process's own CPU time (getrusage), all its threads, and its cgroup's when
// cgroupRoot is given.
func cpuSeconds(cgroupRoot string) CPUSeconds {
	var measured CPUSeconds
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err == nil {
		measured = CPUSeconds{User: seconds(usage.Utime), System: seconds(usage.Stime)}
	}
	if cgroupRoot != "" {
		if cgroup, err := CgroupCPU(cgroupRoot); err == nil {
			measured.Cgroup = &cgroup
		}
	}
	return measured
}

func seconds(t syscall.Timeval) float64 {
	return float64(t.Sec) + float64(t.Usec)/1e6
}
