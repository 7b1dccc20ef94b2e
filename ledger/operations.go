package ledger

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/containerd/errdefs"
	bolt "go.etcd.io/bbolt"
)

// Acquire records lease if its tenant's usage plus its charge stays within
// the quota, atomically with respect to every other process using the
// ledger. A lease already recorded under the same key (a retried Create,
// or a stale one) is replaced. Leases of containers that no longer exist
// are reclaimed first, and returned, whether or not the quota admits the
// new one. Over quota the error is a *QuotaError; a lease whose Listen
// conflicts with a live lease's is refused with a *PortError. With
// q.UIDRanges the lease gets a function uid range no live lease holds
// (lease.UIDRange in the returned lease), or a *UIDRangeError.
func (l *Ledger) Acquire(lease Lease, q Quota) (got Lease, reclaimed []Lease, err error) {
	if lease.Namespace == "" || lease.ID == "" || lease.Tenant == "" {
		return lease, nil, fmt.Errorf("lease needs a namespace, an ID and a tenant (got %q/%q tenant %q): %w",
			lease.Namespace, lease.ID, lease.Tenant, errdefs.ErrInvalidArgument)
	}
	if lease.Created.IsZero() {
		lease.Created = time.Now().UTC()
	}
	lease.UIDRange = nil
	var refused error
	err = l.safely(func() error {
		var err error
		got, reclaimed, refused, err = l.acquire(lease, q)
		return err
	})
	if err != nil {
		return got, reclaimed, err
	}
	return got, reclaimed, refused
}

// acquire: refused is the lease's refusal (*QuotaError, *PortError), err
// what kept the ledger from deciding.
func (l *Ledger) acquire(lease Lease, q Quota) (got Lease, reclaimed []Lease, refused error, err error) {
	db, done, err := l.open(false)
	if err != nil {
		return lease, nil, nil, err
	}
	committed := false
	defer func() { done(committed) }()
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		var used Amounts
		var dead [][]byte
		var portErr *PortError
		heldRanges := map[int]bool{}
		err = b.ForEach(func(k, v []byte) error {
			if string(k) == lease.Key() {
				return nil
			}
			x, err := decode(k, v)
			if err != nil {
				return err
			}
			if !l.alive(x) {
				reclaimed = append(reclaimed, x)
				dead = append(dead, append([]byte(nil), k...))
				return nil
			}
			if x.Tenant == lease.Tenant {
				used = used.Add(x.Charge)
			}
			if lease.Listen != nil && x.Listen != nil && portErr == nil && lease.Listen.Conflicts(*x.Listen) {
				portErr = &PortError{Want: *lease.Listen, Holder: x.Key()}
			}
			if x.UIDRange != nil {
				heldRanges[*x.UIDRange] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range dead {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		if portErr != nil {
			refused = portErr
			return nil // commit the reclaimed deletions, not the lease
		}
		for _, r := range Resources {
			lim, u, ask := q.Limit.Get(r), used.Get(r), lease.Charge.Get(r)
			if lim > 0 && (u > lim || ask > lim-u) {
				refused = &QuotaError{Tenant: lease.Tenant, Resource: r, Limit: lim, Used: u, Asked: ask, Source: q.Source}
				return nil // commit the reclaimed deletions, not the lease
			}
		}
		if q.UIDRanges > 0 {
			i := 0
			for i < q.UIDRanges && heldRanges[i] {
				i++
			}
			if i == q.UIDRanges {
				refused = &UIDRangeError{Ranges: q.UIDRanges}
				return nil // commit the reclaimed deletions, not the lease
			}
			lease.UIDRange = &i
		}
		val, err := json.Marshal(lease)
		if err != nil {
			return err
		}
		return b.Put([]byte(lease.Key()), val)
	})
	if err != nil {
		return lease, reclaimed, nil, l.txFailed("acquire "+lease.Key()+": ", err)
	}
	committed = true
	return lease, reclaimed, refused, nil
}

// Release removes the lease of namespace/id and returns it (nil when there
// is none). With owner set, a lease held by another process is left alone.
func (l *Ledger) Release(namespace, id string, owner *Owner) (*Lease, error) {
	return l.releaseIf(namespace, id, func(x Lease, err error) bool {
		return err != nil || owner == nil || x.Owner == *owner
	})
}

// ReleaseBundle removes the lease of namespace/id only if it was taken
// for bundle, in one transaction, and returns it (nil when there is none
// or it is another bundle's; a lease that does not decode is left to gc).
func (l *Ledger) ReleaseBundle(namespace, id, bundle string) (*Lease, error) {
	return l.releaseIf(namespace, id, func(x Lease, err error) bool {
		return err == nil && x.Bundle == bundle
	})
}

// releaseIf removes the lease of namespace/id when match, given the lease
// and its decoding error, says so, in one transaction, and returns it.
func (l *Ledger) releaseIf(namespace, id string, match func(Lease, error) bool) (*Lease, error) {
	var out *Lease
	key := []byte(namespace + "/" + id)
	err := l.onBucket(true, "release "+string(key)+": ", func(b *bolt.Bucket) error {
		v := b.Get(key)
		if v == nil {
			return nil
		}
		x, err := decode(key, v)
		if !match(x, err) {
			return nil
		}
		out = &x
		return b.Delete(key)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// List returns every lease, ordered by key. A missing ledger has none.
func (l *Ledger) List() ([]Lease, error) {
	var out []Lease
	err := l.onBucket(false, "", func(b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			x, err := decode(k, v)
			if err != nil {
				return err
			}
			out = append(out, x)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}

// GC removes the leases of containers that no longer exist and returns
// them; with dryRun it only returns them.
func (l *Ledger) GC(dryRun bool) ([]Lease, error) {
	var dead []Lease
	err := l.onBucket(true, "gc: ", func(b *bolt.Bucket) error {
		var keys [][]byte
		err := b.ForEach(func(k, v []byte) error {
			x, err := decode(k, v)
			if err != nil {
				// An undecodable lease cannot be attributed: drop it.
				x = Lease{ID: string(k)}
			} else if l.alive(x) {
				return nil
			}
			dead = append(dead, x)
			keys = append(keys, append([]byte(nil), k...))
			return nil
		})
		if err != nil || dryRun {
			return err
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return dead, nil
}
