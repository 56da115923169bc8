package client

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The largest value a parameter may have, as rbl's catalogue bounds it (rbl/libraries/catalogue.py
// CEILINGS and prelude.rbl; tests/test_parameter_bounds.py checks they agree): a duration (ms), a
// factor, a count, and a count that sizes what a pattern keeps in memory (executions remembered).
const (
	maxMs     = 1e9
	maxFactor = 1e9
	maxInt    = math.MaxInt32
	maxWindow = 100_000
)

// params reads library-native parameters, refusing unknown names, wrong types and values out of range.
type params struct {
	values map[string]any
	err    error
}

func readParams(values map[string]any, allowed ...string) *params {
	p := &params{values: values}
	known := map[string]bool{}
	for _, name := range allowed {
		known[name] = true
	}
	var unknown []string
	for name := range values {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		p.err = jobError("unknown parameter(s) %s; expected %s", clip(strings.Join(unknown, ", "), 200), strings.Join(allowed, ", "))
	}
	return p
}

func (p *params) has(name string) bool {
	_, ok := p.values[name]
	return ok
}

// require refuses a job without the named parameters (the catalogue gives them no default).
func (p *params) require(names ...string) {
	for _, name := range names {
		if !p.has(name) {
			p.fail("`%s` is required", name)
		}
	}
}

func (p *params) fail(format string, args ...any) {
	if p.err == nil {
		p.err = jobError(format, args...)
	}
}

func (p *params) integer(name string, low, high, fallback int64) int64 {
	value, ok := p.values[name]
	if !ok {
		return fallback
	}
	n, isInt := integer(value)
	if !isInt {
		p.fail("`%s` must be an integer, got %s", name, shown(value))
		return fallback
	}
	if n < low || n > high {
		p.fail("`%s` must be between %d and %d, got %d", name, low, high, n)
		return fallback
	}
	return n
}

func (p *params) number(name string, low, high, fallback float64) float64 {
	value, ok := p.values[name]
	if !ok {
		return fallback
	}
	number, isNumber := value.(json.Number)
	if !isNumber {
		p.fail("`%s` must be a number, got %s", name, shown(value))
		return fallback
	}
	f, err := strconv.ParseFloat(string(number), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f < low || f > high {
		p.fail("`%s` must be between %g and %g, got %s", name, low, high, clip(string(number), 30))
		return fallback
	}
	return f
}

// duration is a parameter in milliseconds (a whole or fractional number).
func (p *params) duration(name string, fallback time.Duration) time.Duration {
	if !p.has(name) {
		return fallback
	}
	return time.Duration(math.Round(p.number(name, 0, maxMs, 0) * 1e6))
}

func (p *params) choice(name string, fallback string, choices ...string) string {
	value, ok := p.values[name]
	if !ok {
		return fallback
	}
	text, isText := value.(string)
	for _, choice := range choices {
		if isText && text == choice {
			return text
		}
	}
	p.fail("`%s` must be one of %s, got %s", name, strings.Join(choices, ", "), shown(value))
	return fallback
}
