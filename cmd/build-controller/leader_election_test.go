package main

import (
	"strings"
	"testing"
	"time"
)

func TestLeaderElectionFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // part of the error; empty: accepted
	}{
		{name: "defaults", args: nil},
		{name: "shorter, consistent", args: []string{"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}},
		{name: "lease not longer than renew deadline", args: []string{"--leader-elect-lease-duration=10s"},
			want: "--leader-elect-lease-duration=10s must be longer than --leader-elect-renew-deadline=10s"},
		{name: "renew deadline leaves no retry", args: []string{"--leader-elect-retry-period=9s"},
			want: "--leader-elect-renew-deadline=10s must be longer than 10.8s"},
		{name: "zero retry period", args: []string{"--leader-elect-retry-period=0s"}, want: "--leader-elect-retry-period=0s: must be more than zero"},
		{name: "negative lease", args: []string{"--leader-elect-lease-duration=-1s"}, want: "--leader-elect-lease-duration=-1s: must be more than zero"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := &options{}
			cmd := newCommand(opts)
			if err := cmd.ParseFlags(tt.args); err != nil {
				t.Fatal(err)
			}
			err := opts.leaderElection.validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestLeaderElectionRefusedBeforeStart(t *testing.T) {
	cmd := newRootCommand()
	cmd.SetArgs([]string{"--controllers=pod-placement", "--leader-elect-lease-duration=5s"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--leader-elect-lease-duration=5s") {
		t.Fatalf("start-up error = %v, want one naming --leader-elect-lease-duration", err)
	}
}

func TestPlacementTimingsFollowTheElection(t *testing.T) {
	def := leaderElectionTimings{leaseDuration: 15 * time.Second, renewDeadline: 10 * time.Second, retryPeriod: 2 * time.Second}
	if got := def.handoverTimeout(); got != 10*time.Second {
		t.Errorf("default hand-over wait %v, want placement's 10s", got)
	}
	if got := def.heartbeatTTL(); got != 20*time.Second {
		t.Errorf("default heartbeat TTL %v, want placement's 20s", got)
	}
	slow := leaderElectionTimings{leaseDuration: 60 * time.Second, renewDeadline: 40 * time.Second, retryPeriod: 10 * time.Second}
	if got := slow.handoverTimeout(); got != 27*time.Second {
		t.Errorf("hand-over wait with a 10s retry period %v, want 27s (22s of jittered retries and 5s)", got)
	}
	if got := slow.heartbeatTTL(); got != 82*time.Second {
		t.Errorf("heartbeat TTL with a 60s lease %v, want 82s (the lease and a jittered retry)", got)
	}
}
