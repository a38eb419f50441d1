package controller

import (
	"fmt"
	"math"

	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/wire"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// allocateProducerIDs is AllocateProducerIds (67), Kafka's ProducerIdControlManager: a
// registered broker at its epoch gets the next block of ProducerIDBlockSize ids, which
// no other block overlaps because the image's next id only grows.
func (c *Core) allocateProducerIDs(latest *metadata.Image, req *kmsg.AllocateProducerIDsRequest) Result {
	br := latest.Brokers[req.BrokerID]
	switch {
	case br == nil:
		return errorResult(req, kerr.StaleBrokerEpoch, fmt.Sprintf("broker %d is not registered", req.BrokerID))
	case br.Epoch != req.BrokerEpoch:
		return errorResult(req, kerr.StaleBrokerEpoch, fmt.Sprintf("broker %d has epoch %d, not %d", br.ID, br.Epoch, req.BrokerEpoch))
	}
	first := latest.ProducerIDs.Next
	if first > math.MaxInt64-ProducerIDBlockSize {
		return errorResult(req, kerr.UnknownServerError, "producer ids are exhausted")
	}
	rec := at(&wire.ProducerIdsRecord{BrokerID: br.ID, BrokerEpoch: br.Epoch, NextProducerID: first + ProducerIDBlockSize})
	return Result{Records: []wire.MetadataRecord{rec}, Reply: func(uint64) kmsg.Response {
		resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
		resp.SetVersion(req.GetVersion())
		resp.ProducerIDStart, resp.ProducerIDLen = first, ProducerIDBlockSize
		return resp
	}}
}
