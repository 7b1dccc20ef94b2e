// Package gateway answers HTTP requests with fork starts: each request
// has the container's zygote fork a function (package swiftrun), which
// holds its pre-connected QPs at once. It speaks two contracts:
//
//   - OpenWhisk's action runtime (ModeOpenWhisk): POST /init selects the
//     handler once, then each POST /run passes the activation's value and
//     fields to a new function on stdin, as one JSON object, and answers
//     with the JSON object the function prints.
//   - Knative's plain HTTP (ModeHTTP): every request's body goes to a new
//     function on stdin, and its stdout is the response.
//
// Every bound is the gateway's, not the function's: how many functions
// run at once and how many requests wait, the size of a request and of a
// result, the time a client may take to send its request, and the
// activation's deadline, past which the function is ended.
//
// The gateway is the container's workload under swift-init (or runs
// beside it), never PID 1: the zygote does not parse HTTP.
package gateway
