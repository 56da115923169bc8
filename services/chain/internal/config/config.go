// Package config reads and checks what one replica of a topology's service does, fixed for a run:
// its work, its downstream calls and where its sidecar's outbound listener is.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// The work kinds: CPU work that grows with N, a sleep, or nothing.
const (
	WorkFactorial = "factorial"
	WorkSleep     = "sleep"
	WorkNone      = "none"
)

// Bounds that catch a typo before it turns into a run that never ends.
const (
	MaxFactorialN = 1_000_000
	MaxSleepMs    = 3_600_000
	MaxTimes      = 1_000
)

// A service name is what a caller's sidecar routes by (the Host header) and the first half of
// X-Rbl-Failed-At: a DNS-like name, no '/'.
var serviceName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,251}[A-Za-z0-9])?$`)

// Work is step 2 of a request.
type Work struct {
	Kind string   `json:"kind"`
	N    *int     `json:"n,omitempty"`
	Ms   *float64 `json:"ms,omitempty"`
}

// Call is one step of step 3: Times calls to Service, one after another or all at once.
type Call struct {
	Service  string `json:"service"`
	Times    int    `json:"times"`
	Parallel bool   `json:"parallel"`
}

// Config is one replica's configuration file.
type Config struct {
	Service  string `json:"service"`
	Replica  int    `json:"replica"`
	Work     Work   `json:"work"`
	Calls    []Call `json:"calls"`
	Outbound string `json:"outbound"`
}

// Parse reads a configuration file's bytes: one JSON object, no unknown field, then Check.
func Parse(data []byte) (Config, error) {
	var c Config
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("not a configuration: %v", err)
	}
	if _, err := decoder.Token(); !errors.Is(err, io.EOF) {
		return Config{}, errors.New("not a configuration: more after the JSON object")
	}
	return c, c.Check()
}

// Check says what is wrong with a configuration, in one line, or nil.
func (c Config) Check() error {
	if err := CheckName(c.Service); err != nil {
		return fmt.Errorf("service: %v", err)
	}
	if c.Replica < 0 {
		return fmt.Errorf("replica: must be 0 or more, got %d", c.Replica)
	}
	if err := c.Work.check(); err != nil {
		return fmt.Errorf("work: %v", err)
	}
	for i, call := range c.Calls {
		if err := call.check(c.Service); err != nil {
			return fmt.Errorf("calls[%d]: %v", i, err)
		}
	}
	if c.Outbound != "" || len(c.Calls) > 0 {
		if err := checkHostPort(c.Outbound); err != nil {
			return fmt.Errorf("outbound: %v", err)
		}
	}
	return nil
}

// CheckName refuses what cannot be a service's name.
func CheckName(name string) error {
	if !serviceName.MatchString(name) {
		return fmt.Errorf("%q is not a service name (letters, digits, '.', '_', '-'; at most 253)", name)
	}
	return nil
}

func (w Work) check() error {
	switch w.Kind {
	case WorkFactorial:
		if w.Ms != nil {
			return errors.New("factorial takes n, not ms")
		}
		if w.N == nil || *w.N < 0 || *w.N > MaxFactorialN {
			return fmt.Errorf("factorial needs n from 0 to %d", MaxFactorialN)
		}
	case WorkSleep:
		if w.N != nil {
			return errors.New("sleep takes ms, not n")
		}
		if w.Ms == nil || *w.Ms < 0 || *w.Ms > MaxSleepMs {
			return fmt.Errorf("sleep needs ms from 0 to %d", MaxSleepMs)
		}
	case WorkNone:
		if w.N != nil || w.Ms != nil {
			return errors.New("none takes neither n nor ms")
		}
	default:
		return fmt.Errorf("kind must be %s, %s or %s, got %q", WorkFactorial, WorkSleep, WorkNone, w.Kind)
	}
	return nil
}

func (c Call) check(self string) error {
	if err := CheckName(c.Service); err != nil {
		return fmt.Errorf("service: %v", err)
	}
	if c.Service == self {
		return fmt.Errorf("%s calls itself", self)
	}
	if c.Times < 1 || c.Times > MaxTimes {
		return fmt.Errorf("times must be from 1 to %d, got %d", MaxTimes, c.Times)
	}
	return nil
}

func checkHostPort(address string) error {
	host, port, err := net.SplitHostPort(address)
	if err != nil || host == "" {
		return fmt.Errorf("%q is not HOST:PORT", address)
	}
	if number, err := strconv.Atoi(port); err != nil || number < 1 || number > 65535 {
		return fmt.Errorf("%q: port must be from 1 to 65535", address)
	}
	return nil
}

// CheckListen refuses an address to listen on that is not loopback (127.0.0.0/8, ::1, localhost),
// unless anyAddress is set (a container, where the address is the container's own).
func CheckListen(address string, anyAddress bool) error {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("--listen %q is not HOST:PORT", address)
	}
	if number, err := strconv.Atoi(port); err != nil || number < 0 || number > 65535 {
		return fmt.Errorf("--listen %q: port must be from 0 to 65535", address)
	}
	if anyAddress {
		return nil
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--listen %q is not a loopback address (127.0.0.0/8, ::1, localhost); --any-address allows it", address)
}
