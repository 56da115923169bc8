package client

import (
	"testing"
)

// GET /limits reports the limit each shared adaptive limiter holds now, under its jobs' instance
// name, and nothing for a shared pattern whose limit is fixed (a bulkhead).
func TestLimitsReportsEachSharedAdaptiveLimiter(t *testing.T) {
	service, err := NewService("failsafe", "127.0.0.1", 9)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []Step{
		{Pattern: "adaptive_limiter", Params: map[string]any{"minLimit": number("1"), "maxLimit": number("50"),
			"initialLimit": number("7")}},
		{Pattern: "bulkhead", Params: map[string]any{"maxConcurrency": number("3")}},
	} {
		job := &Job{Strategy: []Step{step}, Share: "client", Instance: "round-" + step.Pattern}
		if _, err := service.instance(job, 0); err != nil {
			t.Fatal(err)
		}
	}
	limits := service.Limits()["limits"].([]map[string]any)
	if len(limits) != 1 {
		t.Fatalf("one adaptive limiter shared, got %v", limits)
	}
	got := limits[0]
	if got["instance"] != "round-adaptive_limiter" || got["pattern"] != "adaptive_limiter" || got["limit"] != 7 ||
		got["inflight"] != 0 {
		t.Fatalf("the limiter's initial limit under its instance, got %v", got)
	}
}
