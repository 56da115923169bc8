// rbl-chain: one replica of one service of a topology, the synthetic service every tier
// runs: per request a fault of its own, its work (factorial(n), a sleep, or none), its downstream
// calls through its sidecar, and an answer that says where a failure started.
//
// Run: rbl-chain --listen 127.0.0.1:PORT --config FILE --token TOKEN [--any-address] [--sidecar-dir DIR] [--cgroup-cpu]
// Check: rbl-chain --health http://HOST:PORT/rbl/stats --token TOKEN (a container's health check:
// exit 0 when the replica answers its stats, 1 otherwise).
// It prints `ready` on stdout once listening and exits 0 on SIGTERM or SIGINT; a bad flag or
// configuration is one line on stderr and exit 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"rbl.dev/chain/internal/config"
	"rbl.dev/chain/internal/service"
)

// cgroupRoot is where a container sees its own cgroup.
const cgroupRoot = "/sys/fs/cgroup"

// shutdownGrace is how long requests in flight may take to finish after SIGTERM.
const shutdownGrace = 2 * time.Second

func main() {
	flags := flag.NewFlagSet("rbl-chain", flag.ContinueOnError)
	listen := flags.String("listen", "", "HOST:PORT to listen on (loopback unless --any-address)")
	configFile := flags.String("config", "", "the service's configuration (JSON)")
	token := flags.String("token", "", "the run's token, sent back on every response in "+service.TargetHeader)
	anyAddress := flags.Bool("any-address", false, "allow --listen on an address that is not loopback (a container)")
	sidecarDir := flags.String("sidecar-dir", "", "the directory of the files its sidecar Envoy watches, which PUT /rbl/sidecar/NAME replaces (a pod's shared volume)")
	cgroupCPU := flags.Bool("cgroup-cpu", false, "also report the CPU time its container's cgroup accounts (a container or pod of its own)")
	health := flags.String("health", "", "check URL (with the token) instead of serving: exit 0 when it answers 200")
	if err := flags.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *health != "" {
		os.Exit(checkHealth(*health, *token))
	}
	fail := func(message string) {
		fmt.Fprintln(os.Stderr, "rbl-chain: "+message)
		os.Exit(2)
	}
	if flags.NArg() > 0 {
		fail(fmt.Sprintf("unexpected argument %q", flags.Arg(0)))
	}
	if err := config.CheckListen(*listen, *anyAddress); err != nil {
		fail(err.Error())
	}
	if err := checkToken(*token); err != nil {
		fail(err.Error())
	}
	if *configFile == "" {
		fail("--config FILE is required")
	}
	data, err := os.ReadFile(*configFile)
	if err != nil {
		fail(err.Error())
	}
	c, err := config.Parse(data)
	if err != nil {
		fail(*configFile + ": " + err.Error())
	}
	listener, err := net.Listen("tcp", *listen)
	if err != nil {
		fail(err.Error())
	}
	replica := service.New(c, *token)
	if *sidecarDir != "" {
		if info, err := os.Stat(*sidecarDir); err != nil || !info.IsDir() {
			fail("--sidecar-dir " + *sidecarDir + ": not a directory")
		}
		replica.RelaySidecarFiles(*sidecarDir)
	}
	if *cgroupCPU {
		if _, err := service.CgroupCPU(cgroupRoot); err != nil {
			// the run goes on with the process's own CPU time, which the runner then uses
			fmt.Fprintln(os.Stderr, "rbl-chain: --cgroup-cpu: "+err.Error()+"; reporting the process's CPU time only")
		}
		replica.AccountCgroup(cgroupRoot)
	}
	server := &http.Server{Handler: replica, ReadHeaderTimeout: 30 * time.Second}
	stopped, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	fmt.Println("ready")
	select {
	case err := <-served:
		fmt.Fprintln(os.Stderr, "rbl-chain: "+err.Error())
		os.Exit(1)
	case <-stopped.Done():
	}
	grace, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := server.Shutdown(grace); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(os.Stderr, "rbl-chain: "+err.Error())
	}
	server.Close()
	replica.Close()
}

// checkHealth is a container's health check: 0 when url answers 200 to a request with the token.
func checkHealth(url, token string) int {
	request, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 1
	}
	request.Header.Set(service.TargetHeader, token)
	checker := http.Client{Timeout: 2 * time.Second}
	response, err := checker.Do(request)
	if err != nil {
		return 1
	}
	response.Body.Close()
	if response.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}

// checkToken refuses a token that cannot travel as a header value: visible ASCII, no space.
func checkToken(token string) error {
	if token == "" {
		return errors.New("--token TOKEN is required")
	}
	for i := 0; i < len(token); i++ {
		if token[i] < 0x21 || token[i] > 0x7e {
			return errors.New("--token must be visible ASCII characters, no space")
		}
	}
	return nil
}
