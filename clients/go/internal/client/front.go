package client

// The HTTP/1.1 front end, bounded as protocol v1 says (sizes, read timeouts, connections). Go's
// net/http server answers malformed requests itself, in plain text; the protocol wants a JSON
// {"error": ...} for every one, so the service reads HTTP/1.1 itself (RFC 9112, the subset a
// client of this service sends: Content-Length bodies, keep-alive).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

var (
	requestLine = regexp.MustCompile(`^([A-Z]{1,20}) (/[!-~]*) HTTP/1\.([01])$`)
	// a field value: visible characters, spaces, tabs and obs-text (any byte from 0x80, which the
	// regexp reads as a rune of its own); a NUL or another control character is refused (RFC 9110
	// 5.5), as Node's parser does
	headerLine = regexp.MustCompile("^([!#$%&'*+\\-.^_`|~0-9A-Za-z]+):[ \t]*([\\t\\x20-\\x7e\\x{80}-\\x{10FFFF}]*?)[ \t]*$")
)

const readTimeout = ReadTimeoutMs * time.Millisecond

type reject struct {
	status  int
	message string
}

func (r *reject) Error() string { return r.message }

var errPeerGone = errors.New("the caller closed the connection")

type request struct {
	method, path string
	keepAlive    bool
	body         []byte
}

// Front serves one Service on a listener.
type Front struct {
	Service *Service
	MaxJobs int64
	open    atomic.Int64
}

func (f *Front) Serve(listener net.Listener) error {
	for {
		conn, err := listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		if tcp, ok := conn.(*net.TCPConn); ok {
			tcp.SetNoDelay(true)
		}
		go f.serve(conn)
	}
}

func reply(status int, body any, close bool) []byte {
	data, _ := json.Marshal(body)
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	head.WriteString("content-type: application/json\r\ncontent-length: " + strconv.Itoa(len(data)) + "\r\n")
	if close {
		head.WriteString("connection: close\r\n")
	}
	head.WriteString("\r\n")
	return append(head.Bytes(), data...)
}

func errorBody(message string) map[string]string { return map[string]string{"error": message} }

// lingerClose closes after the caller had a moment to read a final reply (closing with unread
// input would reset the connection and lose the reply).
func lingerClose(conn net.Conn) {
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.CloseWrite()
		conn.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
		io.Copy(io.Discard, io.LimitReader(conn, 1<<20))
	}
	conn.Close()
}

func (f *Front) serve(conn net.Conn) {
	count := f.open.Add(1)
	defer f.open.Add(-1)
	// a bug must not take the service down, nor drop the caller without a reply: a panic in one
	// connection's goroutine would end the process
	defer func() {
		if failure := recover(); failure != nil {
			conn.Write(reply(http.StatusInternalServerError, errorBody(clip(sprintf("internal error: %v", failure), 300)), true))
			lingerClose(conn)
		}
	}()
	reader := bufio.NewReaderSize(conn, 16*1024)
	if count > f.MaxJobs {
		conn.SetReadDeadline(time.Now().Add(readTimeout))
		readRequest(reader, conn) // whatever it was: it gets the 503
		conn.Write(reply(http.StatusServiceUnavailable, errorBody("more than "+strconv.FormatInt(f.MaxJobs, 10)+" connections at once"), true))
		lingerClose(conn)
		return
	}
	for {
		conn.SetReadDeadline(time.Now().Add(readTimeout))
		req, err := readRequest(reader, conn)
		if err != nil {
			var r *reject
			if errors.As(err, &r) {
				conn.Write(reply(r.status, errorBody(r.message), true))
				lingerClose(conn)
			} else {
				conn.Close()
			}
			return
		}
		conn.SetReadDeadline(time.Time{})
		status, body := f.dispatch(req, reader, conn)
		data := reply(status, body, !req.keepAlive)
		if req.method == http.MethodHead {
			// a reply to HEAD has no body (RFC 9110 9.3.2): one would be read as the next reply
			data = data[:bytes.Index(data, []byte("\r\n\r\n"))+4]
		}
		if _, err := conn.Write(data); err != nil || !req.keepAlive {
			lingerClose(conn)
			return
		}
	}
}

func timeoutOr(err error, status int, message string) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
		return &reject{http.StatusRequestTimeout, "the request did not arrive within the read timeout"}
	}
	return &reject{status, message}
}

func readRequest(reader *bufio.Reader, conn net.Conn) (*request, error) {
	var lines []string
	size := 0
	for {
		line, err := reader.ReadSlice('\n')
		size += len(line)
		if size > MaxHeaderBytes || errors.Is(err, bufio.ErrBufferFull) {
			return nil, &reject{http.StatusRequestHeaderFieldsTooLarge, "request headers are over the size limit"}
		}
		if err != nil {
			if len(lines) == 0 && len(line) == 0 && errors.Is(err, io.EOF) {
				return nil, errPeerGone
			}
			return nil, timeoutOr(err, http.StatusBadRequest, "the connection ended inside the request headers")
		}
		text := strings.TrimRight(string(line), "\r\n")
		if text == "" {
			if len(lines) == 0 {
				continue // a stray empty line before a request (RFC 9112 2.2)
			}
			break
		}
		lines = append(lines, text)
	}
	match := requestLine.FindStringSubmatch(lines[0])
	if match == nil {
		return nil, &reject{http.StatusBadRequest, "malformed request line: " + clip(strconvQuote(lines[0]), 60)}
	}
	req := &request{method: match[1], path: match[2], keepAlive: match[3] == "1"}
	headers := map[string][]string{}
	for _, line := range lines[1:] {
		h := headerLine.FindStringSubmatch(line)
		if h == nil {
			return nil, &reject{http.StatusBadRequest, "malformed header line: " + clip(strconvQuote(line), 60)}
		}
		name := strings.ToLower(h[1])
		headers[name] = append(headers[name], h[2])
	}
	for _, value := range headers["connection"] {
		for _, token := range strings.Split(strings.ToLower(value), ",") {
			switch strings.TrimSpace(token) {
			case "close":
				req.keepAlive = false
			case "keep-alive":
				req.keepAlive = true
			}
		}
	}
	if _, chunked := headers["transfer-encoding"]; chunked {
		return nil, &reject{http.StatusLengthRequired, "a body needs a Content-Length (no chunked transfer coding)"}
	}
	length := 0
	if values, ok := headers["content-length"]; ok {
		for _, value := range values {
			if value == "" || strings.Trim(value, "0123456789") != "" || len(value) > 18 {
				return nil, &reject{http.StatusBadRequest, "a bad Content-Length: " + clip(strconvQuote(value), 30)}
			}
			n, _ := strconv.Atoi(value)
			if value != values[0] {
				return nil, &reject{http.StatusBadRequest, "two different Content-Lengths"}
			}
			length = n
		}
	}
	if length > MaxBodyBytes {
		return nil, &reject{http.StatusRequestEntityTooLarge, "the body is over " + strconv.Itoa(MaxBodyBytes) + " bytes"}
	}
	req.body = make([]byte, length)
	if _, err := io.ReadFull(reader, req.body); err != nil {
		return nil, timeoutOr(err, http.StatusBadRequest, "the connection ended inside the body")
	}
	return req, nil
}

func strconvQuote(s string) string { return strconv.Quote(s) }

func (f *Front) dispatch(req *request, reader *bufio.Reader, conn net.Conn) (int, any) {
	route, _, _ := strings.Cut(req.path, "?") // the route is the path: a query does not change it
	switch route {
	case "/health":
		if req.method != http.MethodGet {
			return http.StatusMethodNotAllowed, errorBody("/health takes GET")
		}
		return http.StatusOK, f.Service.Health()
	case "/limits":
		if req.method != http.MethodGet {
			return http.StatusMethodNotAllowed, errorBody("/limits takes GET")
		}
		return http.StatusOK, f.Service.Limits()
	case "/run", "/call":
		if req.method != http.MethodPost {
			return http.StatusMethodNotAllowed, errorBody(route + " takes POST")
		}
	default:
		return http.StatusNotFound, errorBody("no route " + clip(strconvQuote(route), 60) + "; there are GET /health, GET /limits, POST /run and POST /call")
	}
	value, err := DecodeBody(req.body)
	var job *Job
	if err == nil {
		job, err = ParseJob(value, f.Service.Host, f.Service.Port)
	}
	if err != nil {
		return http.StatusBadRequest, errorBody(err.Error())
	}
	gone, stop := watchPeer(reader, conn)
	maxCalls := 0 // a /run: the paper's loop
	if route == "/call" {
		maxCalls = 1
	}
	result, err := f.Service.Run(job, gone, maxCalls)
	stop()
	if err != nil {
		return http.StatusBadRequest, errorBody(err.Error())
	}
	return http.StatusOK, result
}

// watchPeer closes `gone` when the caller closes its side (or the connection breaks) while its job
// runs; stop() ends the watch and leaves any bytes it saw (a pipelined request) in the reader.
func watchPeer(reader *bufio.Reader, conn net.Conn) (<-chan struct{}, func()) {
	gone := make(chan struct{})
	done := make(chan struct{})
	var stopping atomic.Bool
	conn.SetReadDeadline(time.Time{})
	go func() {
		defer close(done)
		if _, err := reader.Peek(1); err != nil && !stopping.Load() {
			close(gone)
		}
	}()
	return gone, func() {
		stopping.Store(true)
		conn.SetReadDeadline(time.Now()) // wakes the Peek
		<-done
		conn.SetReadDeadline(time.Time{})
	}
}
