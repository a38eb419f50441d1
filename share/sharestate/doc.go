// Package sharestate is exactq's share coordinator: the persisted state of every
// share-partition (SPSO, state and leader epochs, delivery-complete count, and the
// delivery state of in-flight offset ranges) over the internal topic __share_group_state.
package sharestate
