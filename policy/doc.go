// Package policy reads the tenant security policy (/etc/swift/policy.toml):
// which tenants exist, which Kubernetes namespaces map to them, which
// devices, peers, limits and quotas they get, whether they may use the
// zygote (fork sharing), and their seccomp level. Parse validates a file
// completely and reports every problem with its line; Resolve decides a
// container's tenant from who asks (a CRI pod's namespace, or a local
// caller) so that a workload cannot pick another tenant by annotation.
//
// A node without a policy file gets Open(): one implicit "default" tenant,
// any tenant name accepted, no limits — the behaviour before policies
// existed. Writing a policy file turns enforcement on.
package policy
