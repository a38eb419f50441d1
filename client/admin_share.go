package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupDescription is one group of DescribeShareGroups (ShareGroupDescribe, KIP-932).
type ShareGroupDescription struct {
	Group       string
	Coordinator int32
	// State is "Empty", "Stable" or "Dead".
	State           string
	GroupEpoch      int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ShareMemberDescription // sorted by member id
	// Err is the group's error: kerr.GroupIDNotFound for a group that does not exist (or
	// is not a share group).
	Err error
}

// ShareMemberDescription is one member of a described share group.
type ShareMemberDescription struct {
	MemberID         string
	MemberEpoch      int32
	ClientID         string
	ClientHost       string
	RackID           string // "" when the member sent none
	SubscribedTopics []string
	// Assignment is the member's partitions, sorted; other members may share them.
	Assignment []TopicPartition
}

// DescribeShareGroups describes share groups, each asked of its coordinator, in the order
// given.
func (a *Admin) DescribeShareGroups(ctx context.Context, groups ...string) ([]ShareGroupDescription, error) {
	got := map[string]ShareGroupDescription{}
	errs := a.byCoordinator(ctx, coordinatorGroup, groups, func(ctx context.Context, node int32, ids []string) (map[string]error, error) {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = ids
		resp, err := a.cl.do(ctx, broker(node), req)
		if err != nil {
			return nil, err
		}
		res := map[string]error{}
		for _, g := range resp.(*kmsg.ShareGroupDescribeResponse).Groups {
			d := ShareGroupDescription{
				Group: g.GroupID, Coordinator: node, State: g.GroupState, GroupEpoch: g.GroupEpoch,
				AssignmentEpoch: g.AssignmentEpoch, Assignor: g.Assignor, Err: kerrWithMessage(g.ErrorCode, g.ErrorMessage),
			}
			for _, m := range g.Members {
				md := ShareMemberDescription{
					MemberID: m.MemberID, MemberEpoch: m.MemberEpoch, ClientID: m.ClientID, ClientHost: m.ClientHost,
					SubscribedTopics: m.SubscribedTopicNames,
				}
				if m.RackID != nil {
					md.RackID = *m.RackID
				}
				for _, t := range m.Assignment.TopicPartitions {
					for _, p := range t.Partitions {
						md.Assignment = append(md.Assignment, TopicPartition{t.Topic, p})
					}
				}
				md.Assignment = sortTPs(md.Assignment)
				d.Members = append(d.Members, md)
			}
			sort.Slice(d.Members, func(i, j int) bool { return d.Members[i].MemberID < d.Members[j].MemberID })
			got[g.GroupID], res[g.GroupID] = d, d.Err
		}
		return res, nil
	})
	return groupResults(groups, errs, func(id string, err error) ShareGroupDescription {
		d, ok := got[id]
		if !ok {
			d = ShareGroupDescription{Group: id, Coordinator: -1}
		}
		d.Err = err
		return d
	})
}

// ShareGroupOffset is one share partition of DescribeShareGroupOffsets.
type ShareGroupOffset struct {
	// StartOffset is the share-partition start offset (SPSO): every record before it is
	// acknowledged or archived. -1 when the share partition is not initialized yet.
	StartOffset int64
	LeaderEpoch int32
	// Lag is the number of records at or after StartOffset not yet delivered for good
	// (KIP-1226); -1 when unknown (not initialized, or a broker before
	// DescribeShareGroupOffsets v1).
	Lag int64
	Err error
}

// DescribeShareGroupOffsets returns the start offset and lag of every share partition the
// group has initialized state for (DescribeShareGroupOffsets with null topics).
func (a *Admin) DescribeShareGroupOffsets(ctx context.Context, group string) (map[TopicPartition]ShareGroupOffset, error) {
	out := map[TopicPartition]ShareGroupOffset{}
	errs := a.byCoordinator(ctx, coordinatorGroup, []string{group}, func(ctx context.Context, node int32, _ []string) (map[string]error, error) {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID, rg.Topics = group, nil // null: every initialized share partition
		req.Groups = []kmsg.DescribeShareGroupOffsetsRequestGroup{rg}
		resp, err := a.cl.do(ctx, broker(node), req)
		if err != nil {
			return nil, err
		}
		r := resp.(*kmsg.DescribeShareGroupOffsetsResponse)
		clear(out) // a retried round starts over
		groupErr := error(fmt.Errorf("client: coordinator %d did not answer for %q", node, group))
		for _, g := range r.Groups {
			if g.GroupID != group {
				continue
			}
			groupErr = kerrWithMessage(g.ErrorCode, g.ErrorMessage)
			for _, t := range g.Topics {
				for _, p := range t.Partitions {
					o := ShareGroupOffset{StartOffset: p.StartOffset, LeaderEpoch: p.LeaderEpoch, Lag: p.Lag,
						Err: kerrWithMessage(p.ErrorCode, p.ErrorMessage)}
					if r.Version < 1 {
						o.Lag = -1
					}
					out[TopicPartition{t.Topic, p.Partition}] = o
				}
			}
		}
		return map[string]error{group: groupErr}, nil
	})
	if err := errs[group]; err != nil {
		return nil, fmt.Errorf("group %s: %w", group, err)
	}
	return out, firstErr(out, func(o ShareGroupOffset) error { return o.Err })
}

// AlterShareGroupOffsets sets the start offset (SPSO) of share partitions of an empty share
// group (AlterShareGroupOffsets, KIP-932): each partition's share state starts over at the
// given offset, nothing in flight, so the group's next fetch starts there. -1 applies the
// group's share.auto.offset.reset. A missing group is created. The group must have no
// members (kerr.NonEmptyGroup); the result has each partition's error (nil: done,
// kerr.UnknownTopicOrPartition for one that does not exist), and the error joins them.
func (a *Admin) AlterShareGroupOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64) (map[TopicPartition]error, error) {
	out := map[TopicPartition]error{}
	errs := a.byCoordinator(ctx, coordinatorGroup, []string{group}, func(ctx context.Context, node int32, _ []string) (map[string]error, error) {
		req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
		req.GroupID = group
		byTopic := map[string]int{}
		for _, tp := range sortTPs(slices.Collect(maps.Keys(offsets))) {
			i, ok := byTopic[tp.Topic]
			if !ok {
				rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
				rt.Topic = tp.Topic
				req.Topics = append(req.Topics, rt)
				i = len(req.Topics) - 1
				byTopic[tp.Topic] = i
			}
			rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
			rp.Partition, rp.StartOffset = tp.Partition, offsets[tp]
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		}
		resp, err := a.cl.do(ctx, broker(node), req)
		if err != nil {
			return nil, err
		}
		r := resp.(*kmsg.AlterShareGroupOffsetsResponse)
		clear(out)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				out[TopicPartition{t.Topic, p.Partition}] = kerrWithMessage(p.ErrorCode, p.ErrorMessage)
			}
		}
		return map[string]error{group: kerrWithMessage(r.ErrorCode, r.ErrorMessage)}, nil
	})
	if err := errs[group]; err != nil {
		return nil, fmt.Errorf("group %s: %w", group, err)
	}
	return out, joinTPErrors(out)
}

// DeleteShareGroupOffsets deletes the share state of topics in an empty share group
// (DeleteShareGroupOffsets, KIP-932): the group forgets where it was, and its next member
// starts those topics again from share.auto.offset.reset. The group must exist
// (kerr.GroupIDNotFound) and have no members (kerr.NonEmptyGroup); the result has each
// topic's error (kerr.UnknownTopicOrPartition for a missing topic or one without offsets),
// and the error joins them.
func (a *Admin) DeleteShareGroupOffsets(ctx context.Context, group string, topics ...string) (map[string]error, error) {
	out := map[string]error{}
	errs := a.byCoordinator(ctx, coordinatorGroup, []string{group}, func(ctx context.Context, node int32, _ []string) (map[string]error, error) {
		req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
		req.GroupID = group
		for _, t := range dedupe(topics) {
			rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
			rt.Topic = t
			req.Topics = append(req.Topics, rt)
		}
		resp, err := a.cl.do(ctx, broker(node), req)
		if err != nil {
			return nil, err
		}
		r := resp.(*kmsg.DeleteShareGroupOffsetsResponse)
		clear(out)
		for _, t := range r.Topics {
			out[t.Topic] = kerrWithMessage(t.ErrorCode, t.ErrorMessage)
		}
		return map[string]error{group: kerrWithMessage(r.ErrorCode, r.ErrorMessage)}, nil
	})
	if err := errs[group]; err != nil {
		return nil, fmt.Errorf("group %s: %w", group, err)
	}
	var joined []error
	for _, t := range dedupe(topics) {
		if err := out[t]; err != nil {
			joined = append(joined, fmt.Errorf("%s: %w", t, err))
		}
	}
	return out, errors.Join(joined...)
}

// joinTPErrors joins the errors of a per-partition result, each naming its partition.
func joinTPErrors(m map[TopicPartition]error) error {
	var joined []error
	for _, tp := range sortTPs(slices.Collect(maps.Keys(m))) {
		if err := m[tp]; err != nil {
			joined = append(joined, fmt.Errorf("%s[%d]: %w", tp.Topic, tp.Partition, err))
		}
	}
	return errors.Join(joined...)
}
