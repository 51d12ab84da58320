# Sourced by the install scripts: apt_install installs Debian packages as
# root (directly, or through sudo), waiting for another apt run's lock.
# PROG names the calling script in messages.

# as_root runs a command as root: directly, or through sudo.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		echo "${PROG:-install}: needs root for: $*: run as root, or run it yourself" >&2
		exit 1
	fi
}

# apt_install PACKAGE... updates the package lists and installs the packages
# without their recommendations.
apt_install() {
	echo "${PROG:-install}: installing Debian packages: $*" >&2
	export DEBIAN_FRONTEND=noninteractive
	as_root apt-get update -q -o DPkg::Lock::Timeout=600
	as_root apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "$@"
}
