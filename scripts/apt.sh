# Sourced by the *-deps.sh scripts. `apt_install PKG...` installs Debian packages one
# apt at a time: tests that need a tool may run their installers at once, and a second
# apt-get fails at once on the first one's lock. Locks held by any other apt are
# waited for, up to 10 minutes.
# The lock is this file, opened for reading: nothing is created or truncated, and
# no world-writable directory (/var/lock) is trusted with a path root opens.
apt_install() {
    exec 9<"${BASH_SOURCE[0]}"
    flock 9
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
    flock -u 9
}
