// Package packaging tests what an operator installs: the systemd unit
// (packaging/fenceproxy.service) and the container image (Dockerfile), each
// running the real fenceproxy binary.
//
// The unit is checked by systemd-analyze (verify, and security's exposure
// score), which scripts/install-test-deps.sh installs; the image is built and
// run against the harness's PostgreSQL when a docker daemon answers, and
// TestDockerImageServesMountedConfig is skipped, saying so, when none does.
package packaging
