package broker_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/testbroker"
)

// KIP-939: the broker advertises InitProducerId v6 and shows
// transaction.two.phase.commit.enable (default false, as Kafka) in DescribeConfigs.
// The v6 request path itself is exercised end to end by kgoext/twopc's integration tests
// (twopc_integration_test.go) and compat's Java 2PC test.
func TestTwoPhaseCommitConfigAndVersion(t *testing.T) {
	for _, enabled := range []string{"", "true"} {
		var opts []testbroker.Option
		if enabled != "" {
			opts = append(opts, testbroker.WithConfig(map[string]string{"transaction.two.phase.commit.enable": enabled}))
		}
		tb := testbroker.Start(t, opts...)
		cl := newClient(t, tb.Addr)
		ctx := context.Background()
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 22 {
				found = true
				if k.MaxVersion != 6 {
					t.Fatalf("InitProducerId max version %d, want 6", k.MaxVersion)
				}
			}
		}
		if !found {
			t.Fatal("InitProducerId not advertised")
		}
		rcs, err := kadm.NewClient(cl).DescribeBrokerConfigs(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On("1", nil)
		if err != nil {
			t.Fatal(err)
		}
		want := "false"
		if enabled != "" {
			want = enabled
		}
		got := ""
		for _, c := range rc.Configs {
			if c.Key == "transaction.two.phase.commit.enable" {
				got = c.MaybeValue()
			}
		}
		if got != want {
			t.Fatalf("transaction.two.phase.commit.enable = %q, want %q", got, want)
		}
	}
}
