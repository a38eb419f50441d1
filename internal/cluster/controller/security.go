package controller

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactq/exactq/internal/cluster/admin"
	"github.com/exactq/exactq/internal/cluster/metadata"
	"github.com/exactq/exactq/internal/security/acl"
	"github.com/exactq/exactq/wire"
)

// handleSecurity decides the security admin requests (CreateAcls, DeleteAcls,
// AlterUserScramCredentials) with cluster/admin against latest, so two requests in
// flight see each other's effect; ok is false for any other request. Each request's
// records are one batch, as Kafka's controller writes them atomically. A request Kafka
// would not parse (acl.ErrMalformed: the broker closes such a connection before asking)
// is answered INVALID_REQUEST in every result.
func (c *Core) handleSecurity(latest *metadata.Image, req any) (r Result, ok bool) {
	var recs []wire.MetadataRecord
	var resp kmsg.Response
	var err error
	switch req := req.(type) {
	case *kmsg.CreateACLsRequest:
		recs, resp, err = admin.CreateAcls(latest, req, func() acl.ID { return acl.ID(c.cfg.NewTopicID()) })
	case *kmsg.DeleteACLsRequest:
		recs, resp, err = admin.DeleteAcls(latest, req)
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		recs, resp = admin.AlterUserScramCredentials(latest, req)
	default:
		return Result{}, false
	}
	if err != nil {
		return errorResult(req, kerr.InvalidRequest, err.Error()), true
	}
	var groups [][]wire.MetadataRecord
	if len(recs) > 0 {
		groups = [][]wire.MetadataRecord{recs}
	}
	return adminResult(req, groups, resp, c.cfg.maxBatchBytes), true
}

// securityErrorResponse is a security admin request's response with code in every result
// (every creation, every filter, every user once, in name order as Kafka's
// getErrorResponse), at the request's version; nil for any other request.
func securityErrorResponse(req kmsg.Request, code *kerr.Error, msg string) kmsg.Response {
	var m *string
	if msg != "" {
		m = &msg
	}
	switch req := req.(type) {
	case *kmsg.CreateACLsRequest:
		resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
		resp.Version = req.Version
		for range req.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code.Code, m
			resp.Results = append(resp.Results, res)
		}
		return resp
	case *kmsg.DeleteACLsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
		resp.Version = req.Version
		for range req.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = code.Code, m
			resp.Results = append(resp.Results, res)
		}
		return resp
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		resp.Version = req.Version
		var users []string
		for _, d := range req.Deletions {
			users = append(users, d.Name)
		}
		for _, u := range req.Upsertions {
			users = append(users, u.Name)
		}
		slices.Sort(users)
		for _, u := range slices.Compact(users) {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode, res.ErrorMessage = u, code.Code, m
			resp.Results = append(resp.Results, res)
		}
		return resp
	}
	return nil
}
