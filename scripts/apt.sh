# Sourced by the *-deps.sh scripts. `apt_install PKG...` installs Debian packages one
# apt at a time: tests that need a tool may run their installers at once, and a second
# apt-get fails at once on the first one's lock. Locks held by any other apt are
# waited for, up to 10 minutes.
apt_install() {
    exec 9>/var/lock/qcg-apt.lock
    flock 9
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
    flock -u 9
}
