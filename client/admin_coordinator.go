package client

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// adminCoordinatorRounds bounds the rounds of byCoordinator: each round looks up the
// coordinators of the keys still pending and sends them one request per coordinator.
const adminCoordinatorRounds = 5

// coordinatorRetriable reports the per-key errors after which an admin request is sent
// again, to a coordinator looked up afresh: the coordinator moved, is loading its state,
// or the connection to it failed.
func coordinatorRetriable(err error) bool {
	return coordinatorMoved(err) || errors.Is(err, kerr.CoordinatorLoadInProgress) || isTransportError(err)
}

// byCoordinator runs an admin exchange for keys (group ids or transactional ids, typ says
// which) that each must go to the key's coordinator. send gets one coordinator's keys and
// returns the error per key (nil: done) or a request-level error for all of them. Keys
// whose error is coordinatorRetriable are retried, after the retry backoff, for up to
// adminCoordinatorRounds rounds or until ctx is done. The result has every key's final
// error; a nil entry is a success.
func (a *Admin) byCoordinator(ctx context.Context, typ int8, keys []string, send func(ctx context.Context, node int32, keys []string) (map[string]error, error)) map[string]error {
	out := make(map[string]error, len(keys))
	pending := dedupe(keys)
	for round := 0; len(pending) > 0; round++ {
		if round > 0 {
			if err := sleepCtx(ctx, a.cl.cfg.retryBackoff); err != nil {
				break // the pending keys keep their last error
			}
		}
		last := round == adminCoordinatorRounds-1
		settle := func(key string, err error) (retry bool) {
			out[key] = err
			return err != nil && !last && coordinatorRetriable(err) && ctx.Err() == nil
		}
		byNode := map[int32][]string{}
		var next []string
		for _, key := range pending {
			node, err := newCoordinator(a.cl, typ, key).find(ctx)
			if err != nil {
				if settle(key, err) {
					next = append(next, key)
				}
				continue
			}
			byNode[node] = append(byNode[node], key)
		}
		nodes := make([]int32, 0, len(byNode))
		for n := range byNode {
			nodes = append(nodes, n)
		}
		sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] })
		for _, node := range nodes {
			ks := byNode[node]
			res, err := send(ctx, node, ks)
			for _, key := range ks {
				keyErr := err
				if keyErr == nil {
					var ok bool
					if keyErr, ok = res[key]; !ok {
						keyErr = fmt.Errorf("client: coordinator %d did not answer for %q", node, key)
					}
				}
				if settle(key, keyErr) {
					next = append(next, key)
				}
			}
		}
		pending = next
	}
	return out
}

// allBrokers refreshes metadata and returns every broker's id, sorted.
func (a *Admin) allBrokers(ctx context.Context) ([]int32, error) {
	resp, err := a.cl.refreshMetadata(ctx, nil)
	if err != nil {
		return nil, err
	}
	ids := make([]int32, 0, len(resp.Brokers))
	for _, b := range resp.Brokers {
		ids = append(ids, b.NodeID)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}
