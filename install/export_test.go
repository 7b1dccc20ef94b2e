package install

// DefaultParams are the parameters the examples are generated with.
func DefaultParams(version int) Params {
	return Params{
		Version:     version,
		Name:        DefaultRuntimeName,
		BinaryName:  DefaultBinaryName,
		SwiftConfig: DefaultSwiftConfig,
		Root:        DefaultConfigPath,
		Dir:         "/etc/containerd/conf.d",
		Glob:        "/etc/containerd/conf.d/*.toml",
	}
}
