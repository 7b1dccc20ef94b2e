package inject

import (
	"github.com/opencontainers/runtime-spec/specs-go"
)

// RDMALimits sets linux.resources.rdma for each named device.
type RDMALimits struct {
	Devices   []string
	HCAHandle uint32 // 0 leaves hcaHandles unset
	HCAObject uint32 // 0 leaves hcaObjects unset
}

// Name implements Modifier.
func (RDMALimits) Name() string { return "rdma-limits" }

// Modify implements Modifier.
func (m RDMALimits) Modify(s *specs.Spec) error {
	if m.HCAHandle == 0 && m.HCAObject == 0 {
		return nil
	}
	ensureResources(s)
	if s.Linux.Resources.Rdma == nil {
		s.Linux.Resources.Rdma = map[string]specs.LinuxRdma{}
	}
	for _, d := range m.Devices {
		l := s.Linux.Resources.Rdma[d]
		if m.HCAHandle != 0 {
			v := m.HCAHandle
			l.HcaHandles = &v
		}
		if m.HCAObject != 0 {
			v := m.HCAObject
			l.HcaObjects = &v
		}
		s.Linux.Resources.Rdma[d] = l
	}
	return nil
}
