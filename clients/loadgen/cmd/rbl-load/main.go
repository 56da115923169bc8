// rbl-load: rbl's open-loop load generator. It sends requests at the send times of a schedule file,
// whatever the answers (no coordinated omission), through vegeta's attacker, and writes one CSV line
// per request with its scheduled and actual send times. With --users instead of --schedule it runs
// a closed population (HTTPMon's users): each user thinks an exponential time, sends, waits for the
// answer, and thinks again, for --duration; a request's scheduled time is when its user's think ended.
//
//	rbl-load --url URL (--schedule FILE | --users N --think 1s --duration 30s [--seed 1] [--trace F])
//	         --out FILE.csv [--method GET|POST] [--body-file F] [--max-requests 2000000]
//	         [--timeout 30s] [--max-connections 10000] [--flags-header x-rbl-response-flags]
//
// Only loopback targets are loaded (checked on the URL and again on every socket's address).
// rbl builds it on first use (rbl/targets/client_builds.py) and caches it as loadgen-HASH.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

const (
	maxBodyKept  = 1 << 20                // a /call reply is small; a larger body is read to the end but not kept
	maxBodyFile  = 1 << 20                // a /call job is small; a larger --body-file (or /dev/zero) is refused
	stopGrace    = time.Second            // after SIGTERM/SIGINT, how long in-flight requests may still finish
	flushEvery   = 200 * time.Millisecond // the CSV reaches the file at least this often (calibration reads it as it grows)
	firstWorkers = uint64(256)            // workers started up front; more start when all are busy
	// gcPercent: the heap may grow to 5x the live heap between collections (Go's default: 2x).
	// Each request allocates ~6 KB in vegeta and net/http on a live heap of a few MB, so the
	// default collected ~10 times a second at 4,000 req/s, each with stop-the-world pauses of up
	// to 2-4 ms on a busy machine that landed in the lag's tail; 400 collects 6x less often, for
	// ~30 MB of memory and a little less CPU; no collection at all (GOGC=off under a memory limit)
	// shortened the tail further in some runs, not all, for more CPU and a heap grown to its limit
	// (bench/loadgen_peers.py --gc; docs/benchmarks.md). GOGC, when set, wins.
	gcPercent = 400
)

type options struct {
	url, schedule, out, method, bodyFile, flagsHeader, trace string
	timeout, think, duration                                 time.Duration
	maxConnections, users, maxRequests                       int
	seed                                                     int64
}

func usageError(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "rbl-load: "+format+"\n", args...)
	os.Exit(2)
}

func parseOptions() options {
	var o options
	flag.StringVar(&o.url, "url", "", "target URL (loopback only)")
	flag.StringVar(&o.schedule, "schedule", "", "file of send offsets, integer nanoseconds, one a line, non-decreasing")
	flag.StringVar(&o.out, "out", "", "CSV file of per-request records")
	flag.StringVar(&o.method, "method", "GET", "GET or POST")
	flag.StringVar(&o.bodyFile, "body-file", "", "body of every request (sent as application/json)")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Second, "per-request timeout")
	flag.IntVar(&o.maxConnections, "max-connections", 10000, "most concurrent connections (and in-flight requests)")
	flag.StringVar(&o.flagsHeader, "flags-header", "x-rbl-response-flags", "response header recorded in the flags column")
	flag.IntVar(&o.users, "users", 0, "a closed population of this many users instead of a schedule")
	flag.DurationVar(&o.think, "think", time.Second, "--users: the mean of each user's exponential think time")
	flag.DurationVar(&o.duration, "duration", 0, "--users: how long the users send")
	flag.Int64Var(&o.seed, "seed", 1, "--users: the seed of the think times (user i draws from seed + 7919 i)")
	flag.IntVar(&o.maxRequests, "max-requests", 2_000_000, "--users: most requests sent (the records' bound)")
	flag.StringVar(&o.trace, "trace", "", "--users: `seconds,factor` lines; round(users x factor) users are active")
	flag.Parse()
	switch {
	case flag.NArg() > 0:
		usageError("unexpected argument %q", flag.Arg(0))
	case o.url == "" || o.out == "" || (o.schedule == "") == (o.users == 0):
		usageError("--url, --out and one of --schedule or --users are required")
	case o.users < 0 || o.users > o.maxConnections:
		usageError("--users must be between 1 and --max-connections (%d), got %d", o.maxConnections, o.users)
	case o.users > 0 && (o.duration <= 0 || o.think < 0 || o.maxRequests < 1):
		usageError("--users needs a positive --duration, a --think of 0 or more and --max-requests of at least 1")
	case o.timeout <= 0:
		usageError("--timeout must be positive, got %s", o.timeout)
	case o.maxConnections < 1:
		usageError("--max-connections must be at least 1, got %d", o.maxConnections)
	}
	o.method = strings.ToUpper(o.method)
	if o.method != "GET" && o.method != "POST" {
		usageError("--method must be GET or POST, got %q", o.method)
	}
	if err := checkLoopbackURL(o.url); err != nil {
		usageError("--url %s: %v", o.url, err)
	}
	return o
}

// checkLoopbackURL accepts http(s) URLs whose host is localhost or a loopback address.
func checkLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL (%v)", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme must be http or https, got %q", u.Scheme)
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("host %q is not a loopback address (127.0.0.0/8, ::1, localhost): rbl-load only loads this machine", host)
}

// loopbackOnly refuses a socket to any address that is not loopback: whatever a name resolves to
// or a proxy setting says, nothing else is ever dialled.
func loopbackOnly(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("rbl-load refuses to connect to %s: not a loopback address", address)
	}
	return nil
}

func newAttacker(o options) *vegeta.Attacker {
	dialer := &net.Dialer{KeepAlive: 30 * time.Second, Control: loopbackOnly}
	client := &http.Client{Transport: &http.Transport{
		Proxy:              nil, // never through a proxy: the target is on this machine
		DialContext:        dialer.DialContext,
		DisableCompression: true,
		IdleConnTimeout:    90 * time.Second,
	}}
	workers := min(firstWorkers, uint64(o.maxConnections))
	return vegeta.NewAttacker(
		vegeta.Client(client), // first: the options below change this client
		vegeta.Timeout(o.timeout),
		vegeta.Redirects(vegeta.NoFollow), // a redirect is recorded, never followed elsewhere
		vegeta.KeepAlive(true),
		vegeta.Connections(o.maxConnections),
		vegeta.MaxConnections(o.maxConnections),
		// one worker holds one request in flight: as many workers as connections, so a slow
		// target never holds a send back while a connection is free
		vegeta.Workers(workers),
		vegeta.MaxWorkers(uint64(o.maxConnections)),
		vegeta.MaxBody(maxBodyKept),
	)
}

func percentileMs(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1 // nearest rank
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

func main() {
	o := parseOptions()
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	target := vegeta.Target{Method: o.method, URL: o.url}
	var err error
	if o.bodyFile != "" {
		if target.Body, err = readBodyFile(o.bodyFile); err != nil {
			usageError("--body-file %s: %v", o.bodyFile, err)
		}
		target.Header = http.Header{"Content-Type": []string{"application/json"}}
	}
	outFile, err := createOwn(o.out)
	if err != nil {
		usageError("--out: %v", err)
	}
	out := bufio.NewWriterSize(outFile, 64<<10) // lines reach the file as the buffer fills, and every flushEvery

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	attacker := newAttacker(o)
	var offsets []time.Duration
	var population *populationPacer
	var pacer vegeta.Pacer
	start := time.Now()
	if o.users > 0 {
		population = newPopulationPacer(o.users, o.think, o.duration, o.seed, o.maxRequests, start)
		if o.trace != "" {
			population.trace = readTraceFile(o.trace)
		}
		offsets, pacer = population.due, population
	} else {
		offsets = readScheduleFile(o.schedule)
		start = time.Now() // the offsets count from here: after the file is read
		pacer = &schedulePacer{offsets: offsets, start: start}
	}
	rec, err := newRecorder(out, offsets, start, o.flagsHeader)
	if err != nil {
		fail(err)
	}
	results := attacker.Attack(vegeta.NewStaticTargeter(target), pacer, 0, "")

	flush := time.NewTicker(flushEvery)
	defer flush.Stop()
	var grace <-chan time.Time
loop:
	for {
		select {
		case res, open := <-results:
			if !open {
				break loop
			}
			if err := rec.add(res); err != nil {
				fail(err)
			}
			if population != nil { // its user thinks from the end of the answer, then sends again
				population.done(res.Seq, res.Timestamp.Sub(start)+res.Latency)
			}
		case <-sigs:
			if grace == nil { // stop sending; give in-flight requests a moment, then write what we have
				if population != nil {
					population.stop()
				}
				attacker.Stop()
				grace = time.After(stopGrace)
			}
		case <-grace:
			break loop
		case <-flush.C:
			if err := out.Flush(); err != nil {
				fail(err)
			}
		}
	}
	elapsed := time.Since(start)
	if err := errors.Join(out.Flush(), outFile.Close()); err != nil {
		fail(err)
	}
	lags := rec.lags
	slices.Sort(lags)
	summary, _ := json.Marshal(map[string]any{
		"requests":   len(lags),
		"lag_p50_ms": percentileMs(lags, 0.50),
		"lag_p99_ms": percentileMs(lags, 0.99),
		"lag_max_ms": percentileMs(lags, 1),
		"elapsed_s":  float64(elapsed.Milliseconds()) / 1000,
	})
	fmt.Println(string(summary))
}

// readTraceFile reads --trace, or exits with a usage error naming what is wrong.
func readTraceFile(path string) []tracePoint {
	file, err := os.Open(path)
	if err != nil {
		usageError("--trace: %v", err)
	}
	defer file.Close()
	points, err := readTrace(file)
	if err != nil {
		usageError("--trace %s: %v", path, err)
	}
	return points
}

// readScheduleFile reads --schedule, or exits with a usage error naming what is wrong.
func readScheduleFile(path string) []time.Duration {
	scheduleFile, err := os.Open(path)
	if err != nil {
		usageError("--schedule: %v", err)
	}
	offsets, err := readSchedule(scheduleFile)
	scheduleFile.Close()
	if err != nil {
		usageError("--schedule %s: %v", path, err)
	}
	return offsets
}

// readBodyFile reads a regular file of at most maxBodyFile bytes: never a device, a FIFO (which
// would block) or an endless file.
func readBodyFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil {
		return nil, err
	} else if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	body, err := io.ReadAll(io.LimitReader(f, maxBodyFile+1))
	if err == nil && len(body) > maxBodyFile {
		err = fmt.Errorf("larger than %d bytes", maxBodyFile)
	}
	return body, err
}

// createOwn makes a new file at path, as rbl's own writes do (rbl/store/durable.py's new_file): what
// is there is unlinked first (a link itself, never what it points to), and the file is created
// exclusively without following a link, so a link planted meanwhile fails the open, not written through.
func createOwn(path string) (*os.File, error) {
	if err := syscall.Unlink(path); err != nil && !errors.Is(err, syscall.ENOENT) {
		return nil, &os.PathError{Op: "unlink", Path: path, Err: err}
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "rbl-load: writing the records: %v\n", err)
	os.Exit(1)
}
