// Package client is rbl's Go client service: rbl client protocol v1 (clients/protocol.py)
// over failsafe-go, sony/gobreaker v2 and cenkalti/backoff v5.
package client

import (
	"context"
	"errors"
)

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

// isCutShort: the call was ended by the job's limits, which say nothing about the target. Inside a
// failsafe-go execution that is a CutShort from the target, or the bare context.Canceled failsafe-go
// returns for an execution whose context was cancelled without a policy's result (only the job's
// context is cancelled that way: a Timeout cancels with ErrExceeded, a HedgePolicy with the winner's
// result, and a request a policy interrupts fails with errInterrupted).
func isCutShort(err error) bool {
	var cut *CutShort
	return errors.As(err, &cut) || errors.Is(err, context.Canceled)
}

// handled is what the failsafe-go policies handle as a failure: failsafe-go's default (any error)
// but a call cut short by the job's limits (not retried, not replaced by a fallback).
func handled(_ any, err error) bool { return err != nil && !isCutShort(err) }

// errInterrupted: a policy (a Timeout, or a HedgePolicy whose other attempt won) cancelled this
// attempt's context; its request, if one was in flight, is reported with status 0.
var errInterrupted = errors.New("request interrupted by a policy")

// Ending is how a library pattern, not the target's answers, ended a call (clients/protocol.py, "How a
// failed call ended"); the zero Ending when the target's answers decided.
type Ending struct {
	Rejected string // "circuit_breaker", "bulkhead" or "rate_limiter": the call's final failure was that refusal
	WaitUs   int64  // with Rejected: microseconds from the call's start to the refusal
	TimedOut bool   // the call's final failure was a library timeout
	Fallback bool   // the library returned its fallback instead of the failure
}

// Call is one call as the protocol reports it.
type Call struct {
	OK       bool       `json:"ok"`
	Requests [][3]int64 `json:"requests"`
	Rejected string     `json:"rejected,omitempty"`
	WaitUs   *int64     `json:"wait_us,omitempty"` // present exactly when Rejected is
	TimedOut bool       `json:"timed_out,omitempty"`
	Fallback bool       `json:"fallback,omitempty"`
	Repeat   int        `json:"repeat,omitempty"`
	CutShort bool       `json:"cut_short,omitempty"`
}

func (c *Call) sameEnding(e Ending) bool {
	return c.Rejected == e.Rejected && c.TimedOut == e.TimedOut && c.Fallback == e.Fallback
}

func newCall(ok bool, requests [][3]int64, ending Ending, cutShort bool) *Call {
	call := &Call{OK: ok, Requests: requests, Rejected: ending.Rejected, TimedOut: ending.TimedOut,
		Fallback: ending.Fallback, CutShort: cutShort}
	if ending.Rejected != "" {
		wait := ending.WaitUs
		call.WaitUs = &wait
	}
	return call
}

// CallLog collects calls, run-length encoding consecutive identical request-less calls.
type CallLog struct {
	Calls           []*Call
	SuccessfulCalls int
	Requests        int
}

// Add logs a call (CallLog.add in clients/protocol.py): request-less calls merge into the one before
// when ok and the ending are equal and neither was cut short; their waits add up.
func (l *CallLog) Add(ok bool, requests [][3]int64, cutShort bool, ending Ending) {
	l.Requests += len(requests)
	if ok {
		l.SuccessfulCalls++
	}
	if requests == nil {
		requests = [][3]int64{}
	}
	if cutShort {
		l.Calls = append(l.Calls, newCall(ok, requests, ending, true))
		return
	}
	if n := len(l.Calls); n > 0 && len(requests) == 0 {
		last := l.Calls[n-1]
		if len(last.Requests) == 0 && last.OK == ok && !last.CutShort && last.sameEnding(ending) {
			if last.Repeat == 0 {
				last.Repeat = 1
			}
			last.Repeat++
			if last.WaitUs != nil {
				*last.WaitUs += ending.WaitUs
			}
			return
		}
	}
	l.Calls = append(l.Calls, newCall(ok, requests, ending, false))
}
