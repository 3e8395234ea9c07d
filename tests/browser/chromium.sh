# shellcheck shell=bash
# chromium.sh - sourced by the browser tests: finds Debian's chromium, or
# installs it (apt-get install -y chromium) when run as root where apt
# works, and runs it headless. It is an optional test tool, never a
# dependency of cutrace: without it the tests say "skipped: chromium: WHY"
# on stdout and count as skipped, never as passed.
#
#   . tests/browser/chromium.sh
#   browser_find || exit 77      # sets $browser, or prints the skip line
#   browser_run DIR ARGS...      # chromium --headless with a profile in DIR

# Sets $browser to a chromium binary; prints the skip line and returns 1
# when there is none and it cannot be installed.
browser_find() {
    local name why
    for name in chromium chromium-browser; do
        if browser=$(command -v "$name" 2>/dev/null) && [[ -n $browser ]]; then
            return 0
        fi
    done
    if [[ -n ${CUTRACE_NO_CHROMIUM_INSTALL:-} ]]; then
        why="not installed (CUTRACE_NO_CHROMIUM_INSTALL is set)"
    elif [[ $(id -u) -ne 0 ]]; then
        why="not installed, and installing it needs root (apt-get install -y chromium)"
    elif ! command -v apt-get >/dev/null 2>&1; then
        why="not installed, and there is no apt-get"
    else
        echo "browser: installing chromium (apt-get install -y chromium) for the browser tests"
        if DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y chromium >/dev/null 2>&1 ||
            { timeout 300 apt-get update >/dev/null 2>&1 &&
                DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y chromium \
                    >/dev/null 2>&1; }; then
            if browser=$(command -v chromium 2>/dev/null) && [[ -n $browser ]]; then
                return 0
            fi
            why="apt-get installed chromium, but no chromium binary is on PATH"
        else
            why="not installed, and apt-get install -y chromium failed (no network or no package?)"
        fi
    fi
    echo "skipped: chromium: $why"
    return 1
}

# chromium headless with its own profile under $1 (as root it needs
# --no-sandbox; file:// pages may read files only with the last flag).
browser_run() {
    local profile=$1
    shift
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --no-first-run --no-default-browser-check --user-data-dir="$profile" \
        --allow-file-access-from-files --enable-logging=stderr --v=0 "$@"
}
