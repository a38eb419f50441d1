package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups with IncludeAuthorizedOperations (v3+): without an authorizer Kafka
// reports every GROUP operation for each group described without error, including a
// missing group below v6 (Dead, no error); an error, or a version below 3, keeps INT32_MIN.
func TestDescribeGroupsAuthorizedOperations(t *testing.T) {
	e := newEnv(t, nil)
	e.joinNew("g").get(t)
	describe := func(version int16, id string) kmsg.DescribeGroupsResponseGroup {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups, req.IncludeAuthorizedOperations = []string{id}, true
		d, _ := e.c.DescribeGroups(t.Context(), version, req)
		return d.(*kmsg.DescribeGroupsResponse).Groups[0]
	}
	const all = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11
	cases := []struct {
		version int16
		id      string
		want    int32
	}{
		{5, "g", all},
		{3, "g", all},
		{2, "g", -2147483648},
		{5, "missing", all},         // Dead without error below v6
		{6, "missing", -2147483648}, // GROUP_ID_NOT_FOUND
	}
	for _, c := range cases {
		if got := describe(c.version, c.id).AuthorizedOperations; got != c.want {
			t.Errorf("v%d %s: authorized operations %d, want %d", c.version, c.id, got, c.want)
		}
	}
}
