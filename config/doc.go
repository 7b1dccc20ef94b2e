// Package config loads the node configuration of the Swift runtime
// (/etc/swift/config.toml by default). For the shim (Load) a missing file
// means defaults; for an operator (Check) it is a NotFound error, and so is
// a tenant policy the file names that does not exist. A malformed file is an
// InvalidArgument error that names the file and reports every problem at
// once, each with its line and its key as the file spells it
// (config/tomlfile). Sizes (rdma.memlock) are Kubernetes quantities: Ki,
// Mi, Gi are powers of 1024, k, M, G powers of 1000, a plain integer is
// bytes; spellings that could mean either (1g, 64m, 512MB) are refused.
package config
