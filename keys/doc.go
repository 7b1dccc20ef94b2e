// Package keys reads and writes tenant keyrings: the keys with which the
// zygotes of one tenant, on any node, authenticate each other.
//
// A keyring is a text file, one key per line, newest first:
//
//	# comments and blank lines are ignored
//	<id> <64 hex digits: a 32-byte key>
//
// IDs are 1 to 15 characters of [a-z0-9-]. Every key in the ring is
// accepted from a peer; the first is the one a zygote dials with. Rotation
// puts a new key first and keeps the previous one, so that nodes that have
// the new ring and nodes that still have the old one keep accepting each
// other; once every node has the new ring, the old key is dropped.
//
// An operator provisions the same ring on every node (the policy names its
// path per tenant, or the node config's keys_dir holds <tenant>.keys). A
// tenant without one gets a node-local ring with one random key, "local":
// its zygotes cannot reach other nodes.
package keys
