package kgoext

// ResolveCommit is resolveCommit, for the tests of the answers it tells apart.
var ResolveCommit = resolveCommit
