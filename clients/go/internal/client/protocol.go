// Package client is rbl's Go client service: rbl client protocol v1 (clients/protocol.py)
// over failsafe-go, sony/gobreaker v2 and cenkalti/backoff v5.
package client

import "errors"

// Limits every client service applies (clients/protocol.py).
const (
	ProtocolVersion     = 1
	MaxBodyBytes        = 1 << 20
	MaxHeaderBytes      = 32 * 1024
	ReadTimeoutMs       = 5000
	MaxJobs             = 512
	MaxCount            = 1_000_000
	MaxDurationMs       = 86_400_000
	MaxSteps            = 8
	MaxInstanceChars    = 1024
	MaxTargetPathChars  = 2048                     // target_url's path and query: the compiler's MAX_TARGET_LENGTH
	MaxURLChars         = MaxTargetPathChars + 512 // room for http:// and any HOST:PORT besides
	sharedInstancesKept = 256
	oneCallStop         = "calls" // a /call's stopped_by when its one call ended by itself
)

// jobRoutes are the routes that run a job (GET /health's "endpoints").
var jobRoutes = []string{"/run", "/call"}

// JobError is a malformed job, or one this service cannot run: HTTP 400.
type JobError struct{ Message string }

func (e *JobError) Error() string { return e.Message }

func jobError(format string, args ...any) error {
	return &JobError{Message: sprintf(format, args...)}
}

// RequestFailed is a request that did not return 2xx (status 0: a connection error): what the patterns react to.
type RequestFailed struct{ Status int }

func (e *RequestFailed) Error() string { return sprintf("request failed with status %d", e.Status) }

// CutShort ends the call in progress: a limit of the job was reached (max_duration, max_requests, disconnected).
type CutShort struct{ Reason string }

func (e *CutShort) Error() string { return "cut short: " + e.Reason }

var (
	errMaxDuration  = &CutShort{"max_duration"}
	errDisconnected = &CutShort{"disconnected"}
)

func isRequestFailed(err error) bool {
	var failed *RequestFailed
	return errors.As(err, &failed)
}

// Call is one call as the protocol reports it.
type Call struct {
	OK       bool       `json:"ok"`
	Requests [][3]int64 `json:"requests"`
	Repeat   int        `json:"repeat,omitempty"`
	CutShort bool       `json:"cut_short,omitempty"`
}

// CallLog collects calls, run-length encoding consecutive identical request-less calls.
type CallLog struct {
	Calls           []*Call
	SuccessfulCalls int
	Requests        int
}

func (l *CallLog) Add(ok bool, requests [][3]int64, cutShort bool) {
	l.Requests += len(requests)
	if ok {
		l.SuccessfulCalls++
	}
	if requests == nil {
		requests = [][3]int64{}
	}
	if cutShort {
		l.Calls = append(l.Calls, &Call{OK: ok, Requests: requests, CutShort: true})
		return
	}
	if n := len(l.Calls); n > 0 && len(requests) == 0 {
		last := l.Calls[n-1]
		if len(last.Requests) == 0 && last.OK == ok && !last.CutShort {
			if last.Repeat == 0 {
				last.Repeat = 1
			}
			last.Repeat++
			return
		}
	}
	l.Calls = append(l.Calls, &Call{OK: ok, Requests: requests})
}
