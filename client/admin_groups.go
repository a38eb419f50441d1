package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupFilter narrows ListGroups. Empty lists match everything.
type GroupFilter struct {
	// States are group states ("Stable", "Empty", "PreparingRebalance",
	// "CompletingRebalance", "Dead"), compared case-insensitively.
	States []string
	// Types are group types ("classic", "consumer", "share").
	Types []string
}

// ListedGroup is one group of ListGroups.
type ListedGroup struct {
	Group        string
	Coordinator  int32  // the broker that listed it
	ProtocolType string // "consumer" for consumer groups; "" for groups without members yet
	State        string // "" from brokers before ListGroups v4
	Type         string // "" from brokers before ListGroups v5
}

// ListGroups lists the groups of every broker (each lists the groups it coordinates),
// sorted by name. A broker that fails contributes an error naming it; the groups of the
// others are still returned.
func (a *Admin) ListGroups(ctx context.Context, filter GroupFilter) ([]ListedGroup, error) {
	brokers, err := a.allBrokers(ctx)
	if err != nil {
		return nil, err
	}
	var out []ListedGroup
	var errs []error
	for _, id := range brokers {
		req := kmsg.NewPtrListGroupsRequest()
		req.StatesFilter, req.TypesFilter = filter.States, filter.Types
		resp, err := a.cl.do(ctx, broker(id), req)
		if err == nil {
			err = kerr.ErrorForCode(resp.(*kmsg.ListGroupsResponse).ErrorCode)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("broker %d: %w", id, err))
			continue
		}
		r := resp.(*kmsg.ListGroupsResponse)
		for _, g := range r.Groups {
			lg := ListedGroup{Group: g.Group, Coordinator: id, ProtocolType: g.ProtocolType, State: g.GroupState, Type: g.GroupType}
			// Brokers before v4 (states) or v5 (types) ignore the filters: apply them here.
			// Such brokers have classic groups only.
			if r.Version < 4 && len(filter.States) > 0 && !containsFold(filter.States, lg.State) {
				continue
			}
			if r.Version < 5 && len(filter.Types) > 0 && !containsFold(filter.Types, "classic") {
				continue
			}
			out = append(out, lg)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, errors.Join(errs...)
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(strings.TrimSpace(x), s) {
			return true
		}
	}
	return false
}

// GroupDescription is one group of DescribeGroups.
type GroupDescription struct {
	Group        string
	Coordinator  int32
	State        string
	ProtocolType string
	// Protocol is the chosen protocol (the assignor, for consumer groups) while the
	// group is stable; "" otherwise.
	Protocol string
	Members  []GroupMemberDescription
	// Err is the group's error: kerr.GroupIDNotFound for a group that does not exist, or
	// a decoding error of a member's consumer-protocol assignment.
	Err error
}

// GroupMemberDescription is one member of a described group.
type GroupMemberDescription struct {
	MemberID   string
	InstanceID string // "" for a dynamic member
	ClientID   string
	ClientHost string
	// Assignment is the member's partitions, decoded with the consumer protocol when the
	// group's protocol type is "consumer"; nil otherwise.
	Assignment []TopicPartition
	// Topics are the subscribed topics, decoded from the member's consumer-protocol
	// metadata while the group is stable; nil otherwise.
	Topics []string
	// RawAssignment and RawMetadata are the bytes as the broker sent them.
	RawAssignment []byte
	RawMetadata   []byte
}

// DescribeGroups describes groups, each asked of its coordinator, in the order given.
func (a *Admin) DescribeGroups(ctx context.Context, groups ...string) ([]GroupDescription, error) {
	got := map[string]GroupDescription{}
	errs := a.byCoordinator(ctx, coordinatorGroup, groups, func(ctx context.Context, node int32, ids []string) (map[string]error, error) {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = ids
		resp, err := a.cl.do(ctx, broker(node), req)
		if err != nil {
			return nil, err
		}
		res := map[string]error{}
		for _, g := range resp.(*kmsg.DescribeGroupsResponse).Groups {
			d := describedGroup(node, &g)
			got[g.Group], res[g.Group] = d, d.Err
		}
		return res, nil
	})
	return groupResults(groups, errs, func(id string, err error) GroupDescription {
		d, ok := got[id]
		if !ok {
			d = GroupDescription{Group: id, Coordinator: -1}
		}
		d.Err = err
		return d
	})
}

// describedGroup converts one DescribeGroups answer, decoding consumer-protocol bytes.
func describedGroup(node int32, g *kmsg.DescribeGroupsResponseGroup) GroupDescription {
	d := GroupDescription{
		Group: g.Group, Coordinator: node, State: g.State, ProtocolType: g.ProtocolType, Protocol: g.Protocol,
		Err: kerrWithMessage(g.ErrorCode, g.ErrorMessage),
	}
	if d.Err == nil && g.State == "Dead" {
		d.Err = kerr.GroupIDNotFound // before v6 a missing group is "Dead" without an error
	}
	var decodeErrs []error
	for _, m := range g.Members {
		md := GroupMemberDescription{
			MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost,
			RawAssignment: m.MemberAssignment, RawMetadata: m.ProtocolMetadata,
		}
		if m.InstanceID != nil {
			md.InstanceID = *m.InstanceID
		}
		if g.ProtocolType == consumerProtocolType {
			tps, err := decodeAssignment(m.MemberAssignment)
			if err != nil {
				decodeErrs = append(decodeErrs, fmt.Errorf("member %s: %w", m.MemberID, err))
			}
			md.Assignment = sortTPs(tps)
			if len(m.ProtocolMetadata) > 0 {
				if sub, err := decodeSubscription(m.MemberID, m.InstanceID, m.ProtocolMetadata); err == nil {
					md.Topics = sub.topics
				}
			}
		}
		d.Members = append(d.Members, md)
	}
	sort.Slice(d.Members, func(i, j int) bool { return d.Members[i].MemberID < d.Members[j].MemberID })
	if d.Err == nil && len(decodeErrs) > 0 {
		d.Err = errors.Join(decodeErrs...)
	}
	return d
}

// groupResults orders per-key results as keys were given (duplicates once) and joins
// their errors, each naming its key.
func groupResults[R any](keys []string, errs map[string]error, result func(key string, err error) R) ([]R, error) {
	var out []R
	var joined []error
	for _, k := range dedupe(keys) {
		err := errs[k]
		out = append(out, result(k, err))
		if err != nil {
			joined = append(joined, fmt.Errorf("%s: %w", k, err))
		}
	}
	return out, errors.Join(joined...)
}

// GroupResult is one group's outcome.
type GroupResult struct {
	Group string
	Err   error
}

// DeleteGroups deletes groups with no members, and their committed offsets. A group with
// members fails with kerr.NonEmptyGroup, an unknown one with kerr.GroupIDNotFound.
func (a *Admin) DeleteGroups(ctx context.Context, groups ...string) ([]GroupResult, error) {
	errs := a.byCoordinator(ctx, coordinatorGroup, groups, func(ctx context.Context, node int32, ids []string) (map[string]error, error) {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = ids
		resp, err := a.cl.do(ctx, broker(node), req)
		if err != nil {
			return nil, err
		}
		res := map[string]error{}
		for _, g := range resp.(*kmsg.DeleteGroupsResponse).Groups {
			res[g.Group] = kerrWithMessage(g.ErrorCode, g.ErrorMessage)
		}
		return res, nil
	})
	return groupResults(groups, errs, func(id string, err error) GroupResult { return GroupResult{Group: id, Err: err} })
}

// CommittedOffset is one partition's committed offset in a group.
type CommittedOffset struct {
	Offset      int64 // the next offset to consume
	LeaderEpoch int32 // -1 when unknown
	Metadata    string
	Err         error
}

// FetchOffsets returns the group's committed offsets for every partition it has one for
// (OffsetFetch for all topics). A pending transactional commit is not waited for: it is
// reported once it completes.
func (a *Admin) FetchOffsets(ctx context.Context, group string) (map[TopicPartition]CommittedOffset, error) {
	out := map[TopicPartition]CommittedOffset{}
	errs := a.byCoordinator(ctx, coordinatorGroup, []string{group}, func(ctx context.Context, node int32, _ []string) (map[string]error, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group, req.Topics = group, nil // v2-v7: null topics is every topic
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group, rg.Topics = group, nil // v8+
		req.Groups = []kmsg.OffsetFetchRequestGroup{rg}
		resp, err := a.cl.do(ctx, broker(node), req)
		if err != nil {
			return nil, err
		}
		r := resp.(*kmsg.OffsetFetchResponse)
		add := func(topic string, p int32, offset int64, epoch int32, meta *string, code int16) {
			co := CommittedOffset{Offset: offset, LeaderEpoch: epoch, Err: kerr.ErrorForCode(code)}
			if meta != nil {
				co.Metadata = *meta
			}
			out[TopicPartition{topic, p}] = co
		}
		clear(out) // a retried round starts over
		groupCode := r.ErrorCode
		if r.Version >= 8 {
			for _, g := range r.Groups {
				groupCode = g.ErrorCode
				for _, t := range g.Topics {
					for _, p := range t.Partitions {
						add(t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode)
					}
				}
			}
		} else {
			for _, t := range r.Topics {
				for _, p := range t.Partitions {
					add(t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode)
				}
			}
		}
		return map[string]error{group: kerr.ErrorForCode(groupCode)}, nil
	})
	if err := errs[group]; err != nil {
		return nil, fmt.Errorf("group %s: %w", group, err)
	}
	return out, firstErr(out, func(c CommittedOffset) error { return c.Err })
}
