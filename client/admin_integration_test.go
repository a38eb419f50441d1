package client

import (
	"errors"
	"strings"
	"testing"

	"github.com/exactq/exactq/internal/testbroker"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A broker's error message replaces kerr's generic description instead of following it.
func TestIntegrationBrokerErrorMessage(t *testing.T) {
	b := testbroker.Start(t)
	a := newTestAdmin(t, b.Addr)
	createTopic(t, a, "demo", 1)
	_, err := a.CreateTopics(testCtx(t), false, NewTopic{Name: "demo"})
	if !errors.Is(err, kerr.TopicAlreadyExists) || kerr.IsRetriable(err) {
		t.Fatalf("create twice: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	if want := "topic demo: TOPIC_ALREADY_EXISTS: Topic 'demo' already exists."; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	var be *BrokerError
	if !errors.As(err, &be) || be.Message != "Topic 'demo' already exists." {
		t.Errorf("BrokerError: %+v", be)
	}
}

func TestKerrWithMessage(t *testing.T) {
	if err := kerrWithMessage(0, nil); err != nil {
		t.Errorf("code 0: %v", err)
	}
	if err := kerrWithMessage(kerr.InvalidConfig.Code, nil); err != error(kerr.InvalidConfig) {
		t.Errorf("no message: %v, want the kerr value itself", err)
	}
	empty := ""
	if err := kerrWithMessage(kerr.InvalidConfig.Code, &empty); err != error(kerr.InvalidConfig) {
		t.Errorf("empty message: %v", err)
	}
	msg := "retention.ms: not a number"
	err := kerrWithMessage(kerr.InvalidConfig.Code, &msg)
	if !errors.Is(err, kerr.InvalidConfig) || err.Error() != "INVALID_CONFIG: retention.ms: not a number" {
		t.Errorf("with message: %q", err)
	}
	if strings.Contains(err.Error(), kerr.InvalidConfig.Description) {
		t.Errorf("description repeated: %q", err)
	}
}
