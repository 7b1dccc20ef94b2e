// Package annotations parses the swift.io/ container annotations into
// Options. Every key under the prefix must be known and every value valid;
// errors are InvalidArgument and name the offending key.
package annotations
