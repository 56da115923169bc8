// Package fault holds a service's own faults (an abort, a delay), switched between scenarios
// through PUT /rbl/fault without a restart, and decides them per request.
//
// As Istio's HTTPFaultInjection does (Envoy's fault filter underneath), the delay comes first and
// the abort after it, each drawn on its own: a delayed request may then be aborted.
package fault

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// MaxDelayMs bounds a delay, as the configuration bounds a sleep.
const MaxDelayMs = 3_600_000

// Abort answers Status at once, on a share Rate of the requests.
type Abort struct {
	Rate   *float64 `json:"rate"`
	Status *int     `json:"status"`
}

// Delay waits Ms before the work, on a share Rate of the requests.
type Delay struct {
	Rate *float64 `json:"rate"`
	Ms   *float64 `json:"ms"`
}

// Spec is the body of PUT /rbl/fault; a missing part is no fault of that kind.
type Spec struct {
	Abort *Abort `json:"abort,omitempty"`
	Delay *Delay `json:"delay,omitempty"`
}

// Faults is a checked Spec as the request path reads it.
type Faults struct {
	abortRate float64
	status    int
	delayRate float64
	delay     time.Duration
	Asked     Spec // what PUT asked for, as GET /rbl/fault shows it
}

// Parse reads and checks a PUT /rbl/fault body; its error is the one-line reason for a 400.
func Parse(body []byte) (*Faults, error) {
	var spec Spec
	decoder := json.NewDecoder(bytes.NewReader(body))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&spec); err != nil {
		return nil, fmt.Errorf("not a fault: %v", err)
	}
	if _, err := decoder.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not a fault: more after the JSON object")
	}
	faults := &Faults{Asked: spec}
	if a := spec.Abort; a != nil {
		if err := checkRate("abort", a.Rate); err != nil {
			return nil, err
		}
		if a.Status == nil || *a.Status < 200 || *a.Status > 599 {
			return nil, errors.New("abort.status must be from 200 to 599")
		}
		faults.abortRate, faults.status = *a.Rate, *a.Status
	}
	if d := spec.Delay; d != nil {
		if err := checkRate("delay", d.Rate); err != nil {
			return nil, err
		}
		if d.Ms == nil || *d.Ms < 0 || *d.Ms > MaxDelayMs {
			return nil, fmt.Errorf("delay.ms must be from 0 to %d", MaxDelayMs)
		}
		faults.delayRate, faults.delay = *d.Rate, time.Duration(*d.Ms*float64(time.Millisecond))
	}
	return faults, nil
}

func checkRate(part string, rate *float64) error {
	if rate == nil || !(*rate >= 0 && *rate <= 1) {
		return fmt.Errorf("%s.rate must be from 0 to 1", part)
	}
	return nil
}

// Decision is what one request gets: a delay (0 for none), then an abort status (0 for none).
type Decision struct {
	Delay time.Duration
	Abort int
}

// Decide draws one request's faults.
func (f *Faults) Decide() Decision {
	var d Decision
	if f.delayRate > 0 && (f.delayRate >= 1 || rand.Float64() < f.delayRate) {
		d.Delay = f.delay
	}
	if f.abortRate > 0 && (f.abortRate >= 1 || rand.Float64() < f.abortRate) {
		d.Abort = f.status
	}
	return d
}

// Holder is a service's current faults, read on every request and replaced by PUT /rbl/fault.
type Holder struct {
	current atomic.Pointer[Faults]
}

// None is no fault at all.
var None = &Faults{}

func (h *Holder) Set(f *Faults) { h.current.Store(f) }

// Get is the current faults (None before the first Set).
func (h *Holder) Get() *Faults {
	if f := h.current.Load(); f != nil {
		return f
	}
	return None
}
