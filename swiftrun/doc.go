// Package swiftrun speaks the zygote's control-socket protocol: what
// swift-run sends to swift-init to have a function forked, and what the
// zygote answers. It is a second implementation of that wire format
// (zygote/proto.h), for front-ends written in Go: swift-gateway, which
// answers HTTP requests with fork starts, and a platform's own proxy.
//
// A request names the handler and its arguments, the peer and how many of
// the pool's QPs to hand over, and passes the function's stdin, stdout
// and stderr as file descriptors. The zygote answers once the function is
// forked (or why it was not), and once more with its wait status when it
// ends. Closing the connection before that ends the function: the zygote
// sends it SIGTERM, and SIGKILL a second later.
//
// Every field the zygote sends is checked before it is used: a reply of
// the wrong size, a message without its NUL, a negative pid or a status
// text beyond the protocol's bound is an error, never a value.
package swiftrun
