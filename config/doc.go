// Package config loads the node configuration of the Swift runtime
// (/etc/swift/config.toml by default). A missing file means defaults; a
// malformed file is an InvalidArgument error that names the file and line.
package config
