package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

var sprintf = fmt.Sprintf

// Step is one pattern of a job's strategy, outermost first.
type Step struct {
	Pattern string
	Params  map[string]any // values: json.Number, string, bool, nil, []any, map[string]any
}

// Job is one virtual user's job.
type Job struct {
	Strategy      []Step
	Host          string
	Port          int
	Path          string
	Successes     int
	MaxRequests   int
	Share         string
	Instance      string
	VU            int64
	MaxDurationMs int64
}

// targetURL is protocol v1's TARGET_URL (clients/protocol.py), the one rule every runtime applies:
// http://HOST[:PORT] and a target path by the compiler's rule (rbl/compiler/urlpath.py). RE2 has no
// lookahead, so "no // at the start of the path" is checked apart (parseURL).
var targetURL = regexp.MustCompile(`^http://([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?` +
	`((?:/(?:[A-Za-z0-9._~!$&'()*+,;=:/\-]|%[0-9A-Fa-f]{2})*(?:\?(?:[A-Za-z0-9._~!$&'()*+,;=:/?\-]|%[0-9A-Fa-f]{2})*)?)?)$`)
var authority = regexp.MustCompile(`^([A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?$`)
var badEscape = regexp.MustCompile(`%(?:[^0-9A-Fa-f]|.[^0-9A-Fa-f]|.?$)`)

// DecodeBody is the body's JSON value; a JobError for non-UTF-8, bad JSON, numbers beyond 64 bits
// or a float's range (anywhere in the body), or nesting deeper than the decoder allows.
func DecodeBody(raw []byte) (any, error) {
	if !utf8.Valid(raw) {
		return nil, jobError("the body is not UTF-8")
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("null")
	}
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.UseNumber()
	var value any
	if err := decoder.Decode(&value); err != nil {
		return nil, jobError("the body is not JSON: %s", clip(err.Error(), 120))
	}
	// More() says false before a stray `]` or `}`: only the end of the input may follow the value
	if _, err := decoder.Token(); err != io.EOF {
		return nil, jobError("the body is not JSON: text after the value")
	}
	if err := checkNumbers(value); err != nil {
		return nil, err
	}
	return value, nil
}

func checkNumbers(value any) error {
	switch v := value.(type) {
	case json.Number:
		text := string(v)
		if isIntegerLiteral(text) {
			if _, err := strconv.ParseInt(text, 10, 64); err != nil {
				return jobError("integer %s does not fit in 64 bits", clip(text, 30))
			}
		} else if f, err := strconv.ParseFloat(text, 64); err != nil || math.IsInf(f, 0) {
			return jobError("number %s is out of range", clip(text, 30))
		}
	case []any:
		for _, item := range v {
			if err := checkNumbers(item); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, item := range v {
			if err := checkNumbers(item); err != nil {
				return err
			}
		}
	}
	return nil
}

func isIntegerLiteral(text string) bool { return !strings.ContainsAny(text, ".eE") }

func clip(text string, n int) string {
	if len(text) > n {
		return text[:n] + "..."
	}
	return text
}

func shown(value any) string {
	data, err := json.Marshal(value)
	if err != nil {
		return "?"
	}
	return clip(string(data), 60)
}

// integer is a JSON integer literal (not 1.0, not true) within int64.
func integer(value any) (int64, bool) {
	number, ok := value.(json.Number)
	if !ok || !isIntegerLiteral(string(number)) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(number), 10, 64)
	return n, err == nil
}

func bounded(body map[string]any, key string, low, high int64, fallback *int64) (int64, error) {
	value, present := body[key]
	if !present || value == nil {
		if fallback == nil {
			return 0, jobError("`%s` must be an integer, got nothing", key)
		}
		return *fallback, nil
	}
	n, ok := integer(value)
	if !ok {
		return 0, jobError("`%s` must be an integer, got %s", key, shown(value))
	}
	if n < low || n > high {
		return 0, jobError("`%s` must be between %d and %d, got %d", key, low, high, n)
	}
	return n, nil
}

func text(body map[string]any, key, fallback string) (string, error) {
	value, present := body[key]
	if !present || value == nil {
		return fallback, nil
	}
	s, ok := value.(string)
	if !ok {
		return "", jobError("`%s` must be a string, got %s", key, shown(value))
	}
	return s, nil
}

// ParseTarget reads `--target HOST:PORT`.
func ParseTarget(value string) (string, int, error) {
	match := authority.FindStringSubmatch(value)
	if match == nil || match[2] == "" {
		return "", 0, fmt.Errorf("--target must be HOST:PORT, got %q", value)
	}
	port, _ := strconv.Atoi(match[2])
	if port > 65535 {
		return "", 0, fmt.Errorf("--target must be HOST:PORT, got %q", value)
	}
	return strings.ToLower(match[1]), port, nil
}

func parseURL(body map[string]any, host string, port int) (string, int, string, error) {
	raw, present := body["target_url"]
	url, ok := raw.(string)
	if !present || !ok {
		return "", 0, "", jobError("`target_url` must be a string, got %s", shown(raw))
	}
	if utf8.RuneCountInString(url) > MaxURLChars {
		return "", 0, "", jobError("`target_url` is longer than %d characters", MaxURLChars)
	}
	match := targetURL.FindStringSubmatch(url)
	if match == nil || strings.HasPrefix(match[3], "//") {
		return "", 0, "", jobError("`target_url` %s is not a URL this service can request: %s", shown(url), urlProblem(url))
	}
	path := match[3]
	if path == "" {
		path = "/"
	}
	if len(path) > MaxTargetPathChars {
		return "", 0, "", jobError("`target_url`'s path is %d characters long; at most %d", len(path), MaxTargetPathChars)
	}
	gotPort := 80
	if match[2] != "" {
		gotPort, _ = strconv.Atoi(match[2])
	}
	if gotPort > 65535 {
		return "", 0, "", jobError("`target_url` has a port out of range: %d", gotPort)
	}
	gotHost := strings.ToLower(match[1])
	if gotHost != host || gotPort != port {
		return "", 0, "", jobError("`target_url` must be on %s:%d (this service's --target), got %s:%d", host, port, gotHost, gotPort)
	}
	return gotHost, gotPort, path, nil
}

// urlProblem says why url does not match targetURL, for the error message.
func urlProblem(url string) string {
	if !strings.HasPrefix(url, "http://") {
		return "it must be an http:// URL"
	}
	rest := url[len("http://"):]
	where, path := rest, ""
	if cut := strings.IndexAny(rest, "/?#"); cut >= 0 {
		where, path = rest[:cut], rest[cut:]
	}
	switch {
	case strings.Contains(where, "@"):
		return "it must not have user info"
	case !authority.MatchString(where):
		return "it must be http://HOST:PORT/PATH with a host name or [IPv6] and a port of 1 to 5 digits"
	case !strings.HasPrefix(path, "/"):
		return "its path must start with `/`"
	case strings.HasPrefix(path, "//"):
		return "its path starts with `//`, which names a host"
	case badEscape.MatchString(path):
		return "`%` does not start a %XX escape"
	}
	return "its path has a character a target path cannot hold (write it as %XX)"
}

func strategy(body map[string]any) ([]Step, error) {
	raw, present := body["strategy"]
	if !present || raw == nil {
		return nil, nil
	}
	items, ok := raw.([]any)
	if !ok {
		return nil, jobError("`strategy` must be a list, got %s", shown(raw))
	}
	if len(items) > MaxSteps {
		return nil, jobError("`strategy` has %d steps; at most %d", len(items), MaxSteps)
	}
	steps := make([]Step, 0, len(items))
	for _, item := range items {
		object, ok := item.(map[string]any)
		pattern, isText := object["pattern"].(string)
		if !ok || !isText {
			return nil, jobError("each strategy step needs a `pattern` string")
		}
		params := map[string]any{}
		if p, present := object["params"]; present && p != nil {
			if params, ok = p.(map[string]any); !ok {
				return nil, jobError("`params` must be an object")
			}
		}
		steps = append(steps, Step{pattern, params})
	}
	return steps, nil
}

// ParseJob is the job in a decoded body, whose target must be host:port.
func ParseJob(value any, host string, port int) (*Job, error) {
	body, ok := value.(map[string]any)
	if !ok {
		return nil, jobError("the job must be a JSON object")
	}
	job := &Job{}
	var err error
	if job.Strategy, err = strategy(body); err != nil {
		return nil, err
	}
	if job.Host, job.Port, job.Path, err = parseURL(body, host, port); err != nil {
		return nil, err
	}
	if job.Share, err = text(body, "share", "user"); err != nil {
		return nil, err
	}
	if job.Share != "user" && job.Share != "client" {
		return nil, jobError("`share` must be one of user, client, got %s", shown(job.Share))
	}
	successes, err := bounded(body, "successes", 1, MaxCount, nil)
	if err != nil {
		return nil, err
	}
	maxRequests, err := bounded(body, "max_requests", 1, MaxCount, nil)
	if err != nil {
		return nil, err
	}
	job.Successes, job.MaxRequests = int(successes), int(maxRequests)
	if job.Instance, err = text(body, "instance", ""); err != nil {
		return nil, err
	}
	if utf8.RuneCountInString(job.Instance) > MaxInstanceChars {
		return nil, jobError("`instance` is longer than %d characters", MaxInstanceChars)
	}
	zero, day := int64(0), int64(MaxDurationMs)
	if job.VU, err = bounded(body, "vu", 0, 1<<31-1, &zero); err != nil {
		return nil, err
	}
	if job.MaxDurationMs, err = bounded(body, "max_duration_ms", 1, MaxDurationMs, &day); err != nil {
		return nil, err
	}
	return job, nil
}
