// rbl's Go client service: rbl client protocol v1 (clients/protocol.py) over failsafe-go,
// sony/gobreaker v2 or cenkalti/backoff v5.
//
// Run: rbl-client-go --library failsafe|gobreaker|backoff --target 127.0.0.1:PORT [--listen 127.0.0.1:0] [--max-jobs 512]
// It prints `listening PORT` on stdout once bound.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"rbl.dev/client-go/internal/client"
)

func main() {
	flags := flag.NewFlagSet("rbl-client-go", flag.ContinueOnError)
	var names []string
	for name := range client.Libraries {
		names = append(names, name)
	}
	sort.Strings(names)
	library := flags.String("library", "", "the library: "+strings.Join(names, ", "))
	target := flags.String("target", "", "HOST:PORT, the only address jobs may send requests to (the fault proxy's)")
	listen := flags.String("listen", "127.0.0.1:0", "HOST:PORT to listen on")
	maxJobs := flags.Int64("max-jobs", client.MaxJobs, "connections served at once; more are answered 503")
	health := flags.String("health", "", "check URL instead of serving: exit 0 when it answers 200 (a container's health check)")
	if err := flags.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *health != "" {
		checker := http.Client{Timeout: 2 * time.Second}
		response, err := checker.Get(*health)
		if err != nil || response.StatusCode != http.StatusOK {
			os.Exit(1)
		}
		os.Exit(0)
	}
	fail := func(message string) {
		fmt.Fprintln(os.Stderr, "rbl-client-go: "+message)
		flags.Usage()
		os.Exit(2)
	}
	if *maxJobs < 1 {
		fail("--max-jobs must be at least 1")
	}
	host, port, err := client.ParseTarget(*target)
	if err != nil {
		fail(err.Error())
	}
	service, err := client.NewService(*library, host, port)
	if err != nil {
		fail(fmt.Sprintf("--library must be one of %s, got %q", strings.Join(names, ", "), *library))
	}
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		fail(err.Error())
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		listener.Close()
		os.Exit(0)
	}()
	listening := listener.Addr().(*net.TCPAddr).Port
	front := &client.Front{Service: service, MaxJobs: *maxJobs}
	go func() {
		// one request to its own /health first: the HTTP paths are warm before the first job
		warm := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		if response, err := warm.Get(fmt.Sprintf("http://127.0.0.1:%d/health", listening)); err == nil {
			response.Body.Close()
		}
		fmt.Printf("listening %d\n", listening)
	}()
	if err := front.Serve(listener); err != nil {
		os.Exit(0)
	}
}
