package shim

import "sync"

// container is what the shim keeps of a container it created: its bundle
// (Exec edits an exec's spec from the container's) and its lease (nil
// without a policy; Delete gives it back).
type container struct {
	bundle string
	lease  *leaseRef
}

// containers holds the containers this shim created, by ID.
type containers struct {
	mu sync.Mutex
	m  map[string]container
}

func (c *containers) add(id string, x container) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]container{}
	}
	c.m[id] = x
}

// bundle is the bundle of container id ("" for one this shim did not
// create).
func (c *containers) bundle(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[id].bundle
}

// remove forgets container id and returns what was kept of it.
func (c *containers) remove(id string) container {
	c.mu.Lock()
	defer c.mu.Unlock()
	x := c.m[id]
	delete(c.m, id)
	return x
}
