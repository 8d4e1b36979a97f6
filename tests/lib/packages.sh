# tests/lib/packages.sh - sourced by tests/run.sh, tests/bench/run.sh and examples/demo.sh.
#
# rlock_install_packages PKG...   installs those Debian packages that are not installed yet
# (as root, or through sudo), calling `apt-get update` once first. Does nothing when
# RLOCK_SKIP_APT=1 or on a system without dpkg. A fresh Debian 12 machine has none of the
# project's dependencies, so every entry script installs what it needs through this.
rlock_install_packages() {
    local missing=() p
    [ "${RLOCK_SKIP_APT:-0}" = 1 ] && return 0
    command -v dpkg-query >/dev/null 2>&1 || { echo "not a Debian system: skipping apt"; return 0; }
    for p in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$p")
        fi
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    printf '\n=== installing: %s\n' "${missing[*]}"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then sudo=(sudo); else
            echo "missing packages (${missing[*]}) and not root" >&2
            return 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -q
    # Installing redis-server may start the distro's service on port 6379; rlock's scripts
    # start their own servers on free ports, so it is left alone.
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}
