package fault

import (
	"strings"
	"testing"
	"time"
)

func TestParseReadsBothParts(t *testing.T) {
	f, err := Parse([]byte(`{"abort": {"rate": 0.2, "status": 503}, "delay": {"rate": 0.1, "ms": 100}}`))
	if err != nil {
		t.Fatal(err)
	}
	if f.abortRate != 0.2 || f.status != 503 || f.delayRate != 0.1 || f.delay != 100*time.Millisecond {
		t.Fatalf("read %+v", f)
	}
}

func TestAnEmptyObjectClearsTheFaults(t *testing.T) {
	f, err := Parse([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if d := f.Decide(); d != (Decision{}) {
			t.Fatalf("decided %+v with no fault", d)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	cases := []struct{ input, says string }{
		{``, "not a fault"},
		{`[]`, "not a fault"},
		{`{"abort": {"rate": 1, "status": 503}} {}`, "more after"},
		{`{"abrot": {}}`, "unknown field"},
		{`{"abort": {"rate": 1, "status": 503, "extra": 1}}`, "unknown field"},
		{`{"abort": {"status": 503}}`, "abort.rate"},
		{`{"abort": {"rate": 1.5, "status": 503}}`, "abort.rate"},
		{`{"abort": {"rate": -0.1, "status": 503}}`, "abort.rate"},
		{`{"abort": {"rate": 1}}`, "abort.status"},
		{`{"abort": {"rate": 1, "status": 199}}`, "abort.status"},
		{`{"abort": {"rate": 1, "status": 600}}`, "abort.status"},
		{`{"abort": {"rate": "1", "status": 503}}`, "not a fault"},
		{`{"delay": {"ms": 5}}`, "delay.rate"},
		{`{"delay": {"rate": 2, "ms": 5}}`, "delay.rate"},
		{`{"delay": {"rate": 1}}`, "delay.ms"},
		{`{"delay": {"rate": 1, "ms": -1}}`, "delay.ms"},
		{`{"delay": {"rate": 1, "ms": 3600001}}`, "delay.ms"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(tc.input))
		if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line saying %q", tc.input, err, tc.says)
		}
	}
}

func TestDecideDrawsEachPartAtItsRate(t *testing.T) {
	f, err := Parse([]byte(`{"abort": {"rate": 0.25, "status": 503}, "delay": {"rate": 0.5, "ms": 1.5}}`))
	if err != nil {
		t.Fatal(err)
	}
	const n = 40000
	aborted, delayed := 0, 0
	for range n {
		d := f.Decide()
		if d.Abort != 0 {
			aborted++
			if d.Abort != 503 {
				t.Fatalf("aborted with %d", d.Abort)
			}
		}
		if d.Delay != 0 {
			delayed++
			if d.Delay != 1500*time.Microsecond {
				t.Fatalf("delayed %v", d.Delay)
			}
		}
	}
	// binomial: 5 standard deviations are about 0.011 (abort) and 0.0125 (delay) of n
	if share := float64(aborted) / n; share < 0.235 || share > 0.265 {
		t.Errorf("aborted %.3f of the requests, want 0.25", share)
	}
	if share := float64(delayed) / n; share < 0.485 || share > 0.515 {
		t.Errorf("delayed %.3f of the requests, want 0.5", share)
	}
}

func TestRatesOfZeroAndOneAreExact(t *testing.T) {
	f, _ := Parse([]byte(`{"abort": {"rate": 1, "status": 418}, "delay": {"rate": 0, "ms": 10}}`))
	for range 1000 {
		if d := f.Decide(); d != (Decision{Abort: 418}) {
			t.Fatalf("decided %+v", d)
		}
	}
}

func TestTheHolderStartsWithNoFault(t *testing.T) {
	var h Holder
	if h.Get() != None {
		t.Fatal("a new holder has a fault")
	}
	f, _ := Parse([]byte(`{"abort": {"rate": 1, "status": 503}}`))
	h.Set(f)
	if h.Get() != f {
		t.Fatal("Set did not take")
	}
}
