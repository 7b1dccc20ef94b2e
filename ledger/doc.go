// Package ledger is the node-wide record of RDMA leases: one lease per
// container (namespace/ID) holding what it was granted — tenant, devices,
// QPs, hca handles and objects, memlock — kept in a bbolt database in the
// state dir (state_dir/ledger.db).
//
// Every shim opens the ledger briefly for one operation and closes it
// again: a lock file (ledger.db.lock, flock) serializes processes, with a
// short timeout, and bbolt's single write transaction makes an Acquire
// (check the tenant's node-wide quota, then record the lease) atomic, so
// concurrent shims never over-allocate. A lease records the bundle
// directory and the shim process (PID and start time); a lease whose
// bundle is gone or whose shim is dead belongs to a container that no
// longer exists and is reclaimed by GC and by every Acquire.
//
// The files, one concern each: amounts.go (amounts, quotas and the
// refusals), lease.go (what a lease holds), owner.go (whether a lease's
// shim is alive, through /proc), ledger.go (the lock, the bbolt open and a
// transaction on the lease bucket), check.go (the out-of-process check
// bbolt opens only files it passed), operations.go (acquire, release, list
// and gc), repair.go (salvage and rebuild) and snapshot.go (the leases as
// of the last write, beside the ledger, for readers that must not wait on
// its lock).
package ledger
