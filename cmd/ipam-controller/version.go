package main

// version is the controller's version, stamped at build time with
// -ldflags "-X main.version=v1.2.3" (the Dockerfile and `make image` do); `--version` prints it.
var version = "dev"
