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

# rlock_enable_backports   adds Debian 12's bookworm-backports suite (valkey-server 8 comes from
# there) to apt's sources when no source lists it yet: a deb822 file of its own beside the
# distribution's debian.sources, on deb.debian.org with Debian's archive key. Does nothing on
# another release or when RLOCK_SKIP_APT=1. Packages only backports has install from it without
# `-t`; nothing else is upgraded from it (its pin priority is 100).
rlock_enable_backports() {
    local codename="" file=/etc/apt/sources.list.d/rlock-bookworm-backports.sources
    [ "${RLOCK_SKIP_APT:-0}" = 1 ] && return 0
    [ -r /etc/os-release ] && codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ "$codename" = bookworm ] || return 0
    if grep -rqsE '(^|[[:space:]])bookworm-backports([[:space:]]|$)' /etc/apt/sources.list \
        /etc/apt/sources.list.d/; then
        return 0
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || { echo "no bookworm-backports and not root" >&2; return 1; }
        sudo=(sudo)
    fi
    printf '\n=== adding bookworm-backports to apt (%s)\n' "$file"
    printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' \
        'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
        | "${sudo[@]}" tee "$file" >/dev/null
}
