package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const clusterUsage = `Usage:
  exactq cluster status (--bootstrap-controller HOST:PORT | -b HOST:PORT)
  exactq cluster add-voter --bootstrap-controller HOST:PORT --node-id N --directory-id ID --controller-endpoint HOST:PORT
  exactq cluster remove-voter --bootstrap-controller HOST:PORT --node-id N --directory-id ID

The metadata quorum, through a controller listener (kafka-metadata-quorum's
--bootstrap-controller): any voter's; the request goes on to the raft leader.
`

// clusterCommands are the subcommands of "exactq cluster".
var clusterCommands = []subcommand{
	{"status", quiet(clusterStatus)}, {"add-voter", quiet(clusterAddVoter)}, {"remove-voter", quiet(clusterRemoveVoter)},
}

// runCluster runs "exactq cluster SUBCOMMAND ...".
func runCluster(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	return dispatch(ctx, "cluster", clusterUsage, clusterCommands, args, stdout, stderr)
}

// controllerFlags are a cluster subcommand's flags: --bootstrap-controller rather than
// -b, since the quorum requests are served on controller listeners.
type controllerFlags struct {
	*cmdFlags
	bootstrap string
}

func newControllerFlags(name, usage string, stdout io.Writer) *controllerFlags {
	f := &controllerFlags{cmdFlags: newFlagsWithoutBrokers(name, usage, stdout)}
	f.StringVar(&f.bootstrap, "bootstrap-controller", "", "")
	return f
}

// parse parses args (no positional arguments) and checks --bootstrap-controller.
func (f *controllerFlags) parse(args []string) error {
	if _, err := f.cmdFlags.parse(args, 0, 0); err != nil {
		return err
	}
	if f.bootstrap == "" {
		return usagef("--bootstrap-controller HOST:PORT is required")
	}
	if _, _, err := net.SplitHostPort(f.bootstrap); err != nil {
		return usagef("--bootstrap-controller %q: %v", f.bootstrap, err)
	}
	return nil
}

// controllerRequest sends req to the controller listener at addr.
func controllerRequest(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(cliClientID))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return cl.SeedBrokers()[0].Request(ctx, req)
}

// quorumLeader is the raft leader's controller listener, as the bootstrap controller knows
// it (DescribeCluster with the controller endpoint type, as Kafka's admin client asks).
func quorumLeader(ctx context.Context, bootstrap string) (string, error) {
	req := kmsg.NewPtrDescribeClusterRequest()
	req.Version = 1
	req.EndpointType = 2 // controllers
	resp, err := controllerRequest(ctx, bootstrap, req)
	if err != nil {
		return "", err
	}
	dc := resp.(*kmsg.DescribeClusterResponse)
	if err := codeErr(dc.ErrorCode, dc.ErrorMessage); err != nil {
		return "", err
	}
	for _, b := range dc.Brokers {
		if b.NodeID == dc.ControllerID {
			return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), nil
		}
	}
	return "", fmt.Errorf("%s knows no quorum leader now (an election may be on): %w", bootstrap, kerr.NotLeaderForPartition)
}

// toLeader sends req to the quorum leader found through bootstrap.
func toLeader(ctx context.Context, bootstrap string, req kmsg.Request) (kmsg.Response, error) {
	leader, err := quorumLeader(ctx, bootstrap)
	if err != nil {
		return nil, err
	}
	return controllerRequest(ctx, leader, req)
}

func clusterStatus(ctx context.Context, args []string, stdout io.Writer) error {
	f := newControllerFlags("cluster status", `Usage: exactq cluster status (--bootstrap-controller HOST:PORT | -b HOST:PORT)

Describes the metadata quorum as kafka-metadata-quorum describe --status and --replication
do: the leader, its epoch (the raft term) and high watermark (the commit index), then each
voter and observer (a node added and not yet promoted) with its directory id, log end
offset, lag behind the leader's log end, how long ago the leader last heard from it and
last saw it caught up, and its controller listener. With -b (a broker's client listener,
which forwards DescribeQuorum to the controller), also the brokers clients are given (the
unfenced ones, the controller marked) and every partition without a leader, with the
replicas it waits for.

      --bootstrap-controller HOST:PORT   a voter's controller listener
  -b, --brokers HOST:PORT[,...]          a broker's client listener
`, stdout)
	f.StringVarP(&f.brokers, "brokers", "b", "", "")
	if _, err := f.cmdFlags.parse(args, 0, 0); err != nil {
		return err
	}
	if f.bootstrap == "" && f.brokers == "" {
		return usagef("--bootstrap-controller HOST:PORT or -b HOST:PORT is required")
	}
	if f.bootstrap != "" {
		if _, _, err := net.SplitHostPort(f.bootstrap); err != nil {
			return usagef("--bootstrap-controller %q: %v", f.bootstrap, err)
		}
	}
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Version = 2
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	var raw kmsg.Response
	var cl *kgo.Client
	var err error
	if f.brokers != "" {
		if cl, err = kgo.NewClient(kgo.SeedBrokers(f.brokerList()...), kgo.ClientID(cliClientID)); err != nil {
			return err
		}
		defer cl.Close()
	}
	if f.bootstrap != "" {
		raw, err = toLeader(ctx, f.bootstrap, req)
	} else {
		raw, err = cl.Request(ctx, req)
	}
	if err != nil {
		return err
	}
	if err := printQuorum(stdout, raw.(*kmsg.DescribeQuorumResponse)); err != nil {
		return err
	}
	if cl == nil {
		return nil
	}
	return printBrokersAndLeaderless(ctx, stdout, cl)
}

// printQuorum prints a DescribeQuorum answer: the leader, then a row per member.
func printQuorum(stdout io.Writer, resp *kmsg.DescribeQuorumResponse) error {
	if err := codeErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return fmt.Errorf("DescribeQuorum: the answer has %d topics, want __cluster_metadata partition 0", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := codeErr(p.ErrorCode, p.ErrorMessage); err != nil {
		return err
	}
	endpoints := map[int32]string{}
	for _, n := range resp.Nodes {
		for _, l := range n.Listeners {
			endpoints[n.NodeID] = net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port)))
		}
	}
	var leaderEnd, leaderNow int64 = -1, -1
	for _, r := range p.CurrentVoters {
		if r.ReplicaID == p.LeaderID {
			leaderEnd, leaderNow = r.LogEndOffset, r.LastFetchTimestamp
		}
	}
	fmt.Fprintf(stdout, "Leader:         %d\nEpoch:          %d\nHighWatermark:  %d\n\n", p.LeaderID, p.LeaderEpoch, p.HighWatermark)
	tw := newTable(stdout)
	fmt.Fprintln(tw, "NODE\tROLE\tDIRECTORY-ID\tLOG-END-OFFSET\tLAG\tFETCHED-AGO\tCAUGHT-UP-AGO\tENDPOINT")
	row := func(r kmsg.DescribeQuorumResponseTopicPartitionReplicaState, role string) {
		if r.ReplicaID == p.LeaderID {
			role = "leader"
		}
		lag := "-"
		if r.LogEndOffset >= 0 && leaderEnd >= 0 {
			lag = strconv.FormatInt(max(leaderEnd-r.LogEndOffset, 0), 10)
		}
		endpoint := endpoints[r.ReplicaID]
		if endpoint == "" {
			endpoint = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ReplicaID, role, base64.RawURLEncoding.EncodeToString(r.ReplicaDirectoryID[:]),
			r.LogEndOffset, lag, ago(leaderNow, r.LastFetchTimestamp), ago(leaderNow, r.LastCaughtUpTimestamp), endpoint)
	}
	for _, r := range p.CurrentVoters {
		row(r, "voter")
	}
	for _, r := range p.Observers {
		row(r, "observer")
	}
	return tw.Flush()
}

// printBrokersAndLeaderless prints the brokers Metadata gives (the controller marked) and
// every partition without a leader, from the broker cl is bootstrapped at.
func printBrokersAndLeaderless(ctx context.Context, stdout io.Writer, cl *kgo.Client) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = nil // every topic
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nBrokers:")
	tw := newTable(stdout)
	fmt.Fprintln(tw, "NODE\tENDPOINT\tRACK\tCONTROLLER")
	for _, b := range resp.Brokers {
		rack, ctl := "-", ""
		if b.Rack != nil {
			rack = *b.Rack
		}
		if b.NodeID == resp.ControllerID {
			ctl = "yes"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", b.NodeID, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), rack, ctl)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	type leaderless struct {
		topic     string
		partition int32
		row       string
	}
	var rows []leaderless
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.Leader >= 0 {
				continue
			}
			name := ""
			if t.Topic != nil {
				name = *t.Topic
			}
			rows = append(rows, leaderless{name, p.Partition,
				fmt.Sprintf("%s\t%d\t%s\t%s\t%s\n", name, p.Partition, ids(p.Replicas), ids(p.OfflineReplicas), errorName(p.ErrorCode))})
		}
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "\nPartitions without a leader: none")
		return nil
	}
	fmt.Fprintln(stdout, "\nPartitions without a leader:")
	tw = newTable(stdout)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tREPLICAS\tOFFLINE\tERROR")
	slices.SortFunc(rows, func(a, b leaderless) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.partition - b.partition)
	})
	for _, r := range rows {
		fmt.Fprint(tw, r.row)
	}
	return tw.Flush()
}

// errorName is a Kafka error code's name (LEADER_NOT_AVAILABLE), "-" for none.
func errorName(code int16) string {
	if ke, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return ke.Message
	}
	return "-"
}

func ids(ns []int32) string {
	if len(ns) == 0 {
		return "-"
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = strconv.Itoa(int(n))
	}
	return strings.Join(out, ",")
}

// ago is how long before the leader's now (its own fetch time, which it reports as its
// clock) a timestamp was, "-" when unknown.
func ago(now, ts int64) string {
	if ts < 0 || now < 0 {
		return "-"
	}
	return (time.Duration(max(now-ts, 0)) * time.Millisecond).String()
}

// voterFlags are add-voter's and remove-voter's: the node and its directory id.
func voterFlags(f *controllerFlags) (id *int32, dir *string) {
	id, dir = new(int32), new(string)
	f.Int32Var(id, "node-id", -1, "")
	f.StringVar(dir, "directory-id", "", "")
	return id, dir
}

// parseVoter checks --node-id and --directory-id (Kafka's form: base64url, 22 characters,
// the directory_id of the node's meta.json).
func parseVoter(id int32, dir string) ([16]byte, error) {
	var out [16]byte
	if id < 0 {
		return out, usagef("--node-id N is required (a node id from 0)")
	}
	b, err := base64.RawURLEncoding.DecodeString(dir)
	if err != nil || len(b) != 16 {
		return out, usagef("--directory-id %q: want the node's directory id (22 characters of base64url, meta.json's directory_id)", dir)
	}
	copy(out[:], b)
	return out, nil
}

func clusterAddVoter(ctx context.Context, args []string, stdout io.Writer) error {
	f := newControllerFlags("cluster add-voter", `Usage: exactq cluster add-voter --bootstrap-controller HOST:PORT --node-id N --directory-id ID --controller-endpoint HOST:PORT [--timeout D]

Adds node N to the metadata quorum's voters (AddRaftVoter, as kafka-metadata-quorum
add-controller): the node, started with an empty directory to join the quorum, becomes an
observer and is promoted once its log has caught up with the leader's. If it has not within
the timeout the command fails with REQUEST_TIMED_OUT and the node stays an observer; run it
again once the node has caught up.

      --bootstrap-controller HOST:PORT   a voter's controller listener
      --node-id N                        the node to add
      --directory-id ID                  its directory id (meta.json's directory_id)
      --controller-endpoint HOST:PORT    its controller listener
      --listener-name NAME               that listener's name (default CONTROLLER)
      --timeout D                        how long the leader waits for it (default 30s)
`, stdout)
	id, dir := voterFlags(f)
	endpoint := f.String("controller-endpoint", "", "")
	listener := f.String("listener-name", "CONTROLLER", "")
	timeout := f.Duration("timeout", 30*time.Second, "")
	if err := f.parse(args); err != nil {
		return err
	}
	dirID, err := parseVoter(*id, *dir)
	if err != nil {
		return err
	}
	host, portText, err := net.SplitHostPort(*endpoint)
	port, perr := strconv.ParseUint(portText, 10, 16)
	if err != nil || perr != nil || host == "" || port == 0 {
		return usagef("--controller-endpoint %q: want the node's controller listener, HOST:PORT", *endpoint)
	}
	if *timeout <= 0 || *timeout > time.Hour {
		return usagef("--timeout %v: want more than 0 and at most 1h", *timeout)
	}
	req := kmsg.NewPtrAddRaftVoterRequest()
	req.Version = 1
	req.VoterID, req.VoterDirectoryID = *id, dirID
	req.TimeoutMillis = int32(timeout.Milliseconds())
	req.Listeners = []kmsg.AddRaftVoterRequestListener{{Name: *listener, Host: host, Port: uint16(port)}}
	ctx, cancel := context.WithTimeout(ctx, *timeout+10*time.Second)
	defer cancel()
	raw, err := toLeader(ctx, f.bootstrap, req)
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.AddRaftVoterResponse)
	if err := codeErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "node %d is a voter\n", *id)
	return nil
}

func clusterRemoveVoter(ctx context.Context, args []string, stdout io.Writer) error {
	f := newControllerFlags("cluster remove-voter", `Usage: exactq cluster remove-voter --bootstrap-controller HOST:PORT --node-id N --directory-id ID

Removes node N from the metadata quorum (RemoveRaftVoter, as kafka-metadata-quorum
remove-controller): a voter (never the last one; the leader removing itself steps down and
the others elect a new one) or an observer.

      --bootstrap-controller HOST:PORT   a voter's controller listener
      --node-id N                        the node to remove
      --directory-id ID                  its directory id (meta.json's directory_id)
`, stdout)
	id, dir := voterFlags(f)
	if err := f.parse(args); err != nil {
		return err
	}
	dirID, err := parseVoter(*id, *dir)
	if err != nil {
		return err
	}
	req := kmsg.NewPtrRemoveRaftVoterRequest()
	req.VoterID, req.VoterDirectoryID = *id, dirID
	raw, err := toLeader(ctx, f.bootstrap, req)
	if err != nil {
		return err
	}
	resp := raw.(*kmsg.RemoveRaftVoterResponse)
	if err := codeErr(resp.ErrorCode, resp.ErrorMessage); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "node %d is no longer a member of the quorum\n", *id)
	return nil
}
