package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/server"
)

// AlterShareGroupOffsets (key 91) and DeleteShareGroupOffsets (key 92), KIP-932: the
// share-group coordinator checks the group (empty share group) and re-initializes or
// deletes the share state through the share-fetch path, which drops the live share
// partitions first. Both answer once everything is durable; they run in Reply.Wait so the
// connection's next requests are read meanwhile.

func (b *Broker) handleAlterShareGroupOffsets(ctx context.Context, req *server.Request, r *kmsg.AlterShareGroupOffsetsRequest) server.Reply {
	if !b.shareGroupsEnabled() {
		return shareDisabled(req)
	}
	return b.shareReply(req, func(s *shareStack) (kmsg.Response, func() kmsg.Response) {
		return nil, func() kmsg.Response { return s.members.AlterShareGroupOffsets(ctx, req.Version, r) }
	})
}

func (b *Broker) handleDeleteShareGroupOffsets(ctx context.Context, req *server.Request, r *kmsg.DeleteShareGroupOffsetsRequest) server.Reply {
	if !b.shareGroupsEnabled() {
		return shareDisabled(req)
	}
	return b.shareReply(req, func(s *shareStack) (kmsg.Response, func() kmsg.Response) {
		return nil, func() kmsg.Response { return s.members.DeleteShareGroupOffsets(ctx, req.Version, r) }
	})
}
