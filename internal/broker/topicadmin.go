package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/controller"
)

// Topic admin requests are forwarded to the controller (controllercall.go, forwardReply);
// these are the two topic creations the broker itself asks for.

// autoCreateTopic asks the controller for a topic a client named in Metadata, with the
// defaults, and returns it once the publisher has opened it here. Kafka's broker answers
// every topic its controller did not create UNKNOWN_TOPIC_OR_PARTITION (an invalid name
// INVALID_TOPIC_EXCEPTION) and only logs why.
func (b *Broker) autoCreateTopic(ctx context.Context, name string) (*topic, *kerr.Error) {
	if isInternalTopic(name) {
		return nil, kerr.UnknownTopicOrPartition
	}
	if t := b.topics.get(name); t != nil {
		return t, nil
	}
	ctx, cancel := context.WithTimeout(ctx, metadataProposeTimeout)
	defer cancel()
	st, idx, err := b.ctl.AutoCreateTopic(ctx, name)
	if err == nil && st.ErrorCode == 0 {
		err = b.pub.wait(ctx, idx)
	}
	switch {
	case err != nil:
		b.ratelog.log(slog.LevelWarn, "auto-create", "auto topic creation failed", "topic", name, "err", err)
	case st.ErrorCode != 0:
		code := kerr.ErrorForCode(st.ErrorCode).(*kerr.Error)
		if code == kerr.InvalidTopicException {
			return nil, code
		}
		reason := ""
		if st.ErrorMessage != nil {
			reason = *st.ErrorMessage
		}
		b.ratelog.log(slog.LevelWarn, "auto-create", "auto topic creation failed", "topic", name, "error", code.Message, "reason", reason)
	default:
		if t := b.topics.getByID(st.TopicID); t != nil {
			return t, nil
		}
	}
	return nil, kerr.UnknownTopicOrPartition
}

// ensureInternalTopicWith asks the controller for a coordinator's internal topic unless
// the broker has it, and returns once the publisher has it here. Never called with
// b.coord.mu held: the publisher takes it to clean up after deleted topics.
func (b *Broker) ensureInternalTopicWith(name string, partitions int32, configs map[string]string) error {
	if b.topics.get(name) != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), metadataProposeTimeout)
	defer cancel()
	st, idx, err := b.ctl.CreateInternalTopic(ctx, controller.CreateInternalTopicRequest{Name: name, Partitions: partitions, Configs: configs})
	if err == nil && st.ErrorCode != 0 {
		err = kerr.ErrorForCode(st.ErrorCode)
		if st.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *st.ErrorMessage)
		}
	}
	if err == nil {
		err = b.pub.wait(ctx, idx)
	}
	if err == nil && b.topics.get(name) == nil {
		err = errors.New("the controller created it, but it is not in this broker's image")
	}
	if err != nil {
		return fmt.Errorf("create internal topic %s: %w", name, err)
	}
	return nil
}

// ensureInternalTopic is ensureInternalTopicWith with the configs Kafka gives the compacted
// internal topics.
func (b *Broker) ensureInternalTopic(name string, partitions int32) error {
	return b.ensureInternalTopicWith(name, partitions, admin.InternalTopicConfigs)
}
