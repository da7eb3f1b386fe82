# shellcheck shell=bash
# Sourced by the set-up scripts: installs the Debian packages the build, the broker and PostgreSQL need when
# any is missing, and puts Swift on the PATH when the shell does not have it.
ensure_prerequisites() {
    local missing=() package
    for package in librabbitmq-dev libsqlite3-dev sqlite3 rabbitmq-server postgresql pkg-config openssl "$@"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing ${missing[*]}" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    command -v swift >/dev/null || export PATH="/opt/swift/usr/bin:$PATH"
}

# The same for packages installed without their recommendations (prometheus recommends the node exporter and
# other daemons the scripts do not use).
ensure_packages_without_recommends() {
    local missing=() package
    for package in "$@"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing ${missing[*]} (without recommendations)" >&2
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}
