// Package service is one replica of a topology's service: per request a fault of its own, its
// work, its downstream calls, and an answer that says where a failure started; the control
// endpoints under /rbl/ switch its faults and report its counters.
package service

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"rbl.dev/chain/internal/config"
	"rbl.dev/chain/internal/fault"
)

// TargetHeader carries the run's token on every response, and on every control request
// (rbl/dataplane/target_token.py).
const TargetHeader = "X-Rbl-Target"

// maxControlBody bounds PUT /rbl/fault's body.
const maxControlBody = 64 << 10

// Header values shared by every response: net/http only reads them.
var (
	textPlain = []string{"text/plain; charset=utf-8"}
	okBody    = []byte("ok\n")
	okLength  = []string{strconv.Itoa(len(okBody))}
	badBody   = []byte("failed\n")
	badLength = []string{strconv.Itoa(len(badBody))}
)

// Service serves one replica.
type Service struct {
	config    config.Config
	token     string
	tokenSent []string
	aborted   []string // X-Rbl-Failed-At of this service's own abort
	faults    fault.Holder
	stats     *Stats
	caller    *caller
	work      func()
	// where PUT /rbl/sidecar/NAME writes its sidecar's files ("": it relays none)
	sidecarDir string
}

// New is a replica of a checked configuration, answering with the run's token.
func New(c config.Config, token string) *Service {
	called := make([]string, len(c.Calls))
	for i, call := range c.Calls {
		called[i] = call.Service
	}
	stats := newStats(called)
	return &Service{config: c, token: token, tokenSent: []string{token}, aborted: []string{c.Service + "/abort"},
		stats: stats, caller: newCaller(c, stats), work: workOf(c.Work)}
}

// workOf is step 2 as a function.
func workOf(w config.Work) func() {
	switch w.Kind {
	case config.WorkFactorial:
		n := *w.N
		return func() { Factorial(n) }
	case config.WorkSleep:
		d := time.Duration(*w.Ms * float64(time.Millisecond))
		return func() { time.Sleep(d) }
	}
	return nil
}

// Factorial is n! by one big multiplication after another: the CPU work is the point, so no
// shortcut (MulRange, a product tree) that would make it cheaper.
func Factorial(n int) *big.Int {
	product, factor := big.NewInt(1), new(big.Int)
	for k := int64(2); k <= int64(n); k++ {
		product.Mul(product, factor.SetInt64(k))
	}
	return product
}

// Close lets the idle outbound connections go.
func (s *Service) Close() { s.caller.transport.CloseIdleConnections() }

func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	header := w.Header()
	header[TargetHeader] = s.tokenSent
	if strings.HasPrefix(r.URL.Path, "/rbl/") {
		s.control(w, r)
		return
	}
	s.stats.requests.Add(1)
	decision := s.faults.Get().Decide()
	if decision.Delay > 0 {
		s.stats.delaysInjected.Add(1)
		if !sleep(r.Context(), decision.Delay) {
			return // the caller is gone: nobody to answer
		}
	}
	if decision.Abort != 0 {
		s.stats.abortsInjected.Add(1)
		header[FailedAtHeader] = s.aborted
		s.answer(w, decision.Abort, 0)
		return
	}
	var spent time.Duration
	if s.work != nil {
		start := time.Now()
		s.work()
		spent = time.Since(start)
	}
	if failed := s.caller.run(r.Context()); failed != "" {
		header[FailedAtHeader] = []string{failed}
		s.answer(w, http.StatusInternalServerError, spent)
		return
	}
	s.answer(w, http.StatusOK, spent)
}

func (s *Service) answer(w http.ResponseWriter, status int, work time.Duration) {
	s.stats.answer(status, work)
	header := w.Header()
	header["Content-Type"] = textPlain
	body, length := okBody, okLength
	if status < 200 || status >= 300 {
		body, length = badBody, badLength
	}
	header["Content-Length"] = length
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// sleep waits d, or less when ctx ends first (false then), as Envoy's fault delay ends when the
// downstream resets.
func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// control serves /rbl/: PUT and GET /rbl/fault, GET /rbl/stats, PUT /rbl/sidecar/NAME; only with
// the run's token.
func (s *Service) control(w http.ResponseWriter, r *http.Request) {
	if !s.tokenOK(r.Header[TargetHeader]) {
		reply(w, http.StatusForbidden, "the "+TargetHeader+" header must carry the run's token")
		return
	}
	switch r.URL.Path {
	case "/rbl/fault":
		switch r.Method {
		case http.MethodPut:
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxControlBody))
			if err != nil {
				reply(w, http.StatusBadRequest, "not a fault: "+err.Error())
				return
			}
			faults, err := fault.Parse(body)
			if err != nil {
				reply(w, http.StatusBadRequest, err.Error())
				return
			}
			s.faults.Set(faults)
			replyJSON(w, faults.Asked)
		case http.MethodGet:
			replyJSON(w, s.faults.Get().Asked)
		default:
			w.Header().Set("Allow", "GET, PUT")
			reply(w, http.StatusMethodNotAllowed, "/rbl/fault takes GET or PUT")
		}
	case "/rbl/stats":
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			reply(w, http.StatusMethodNotAllowed, "/rbl/stats takes GET")
			return
		}
		replyJSON(w, s.stats.snapshot(s.config.Service, s.config.Replica))
	default:
		if name, ok := strings.CutPrefix(r.URL.Path, "/rbl/sidecar/"); ok {
			s.sidecarFile(w, r, name)
			return
		}
		reply(w, http.StatusNotFound, "no such control endpoint: "+r.URL.Path+" (/rbl/fault, /rbl/stats, /rbl/sidecar/NAME)")
	}
}

func (s *Service) tokenOK(sent []string) bool {
	return len(sent) == 1 && subtle.ConstantTimeCompare([]byte(sent[0]), []byte(s.token)) == 1
}

// reply answers a control request with a one-line reason.
func reply(w http.ResponseWriter, status int, line string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, line+"\n")
}

func replyJSON(w http.ResponseWriter, value any) {
	body, err := json.Marshal(value)
	if err != nil {
		reply(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(body, '\n'))
}
