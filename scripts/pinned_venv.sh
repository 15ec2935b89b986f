# Sourced by the setup-*-venv.sh scripts. pinned_venv VENV PROBE PIN...
# makes the Python venv VENV hold the pinned PyPI packages PIN...: pip runs
# only when the venv is missing or broken (its python cannot run the Python
# statement PROBE) or the pins changed since it last ran (VENV/pins.txt).
# Two runs of one tree never install at once (a lock on this file). Prints
# nothing; the caller prints what it provides.
pinned_venv() {
  local venv="$1" probe="$2"
  shift 2
  local stamp="$venv/pins.txt" wanted
  wanted="$(printf '%s\n' "$@")"
  _pinned_venv_ready() {
    "$venv/bin/python" -c "$probe" 2>/dev/null && [ "$(cat "$stamp" 2>/dev/null)" = "$wanted" ]
  }
  _pinned_venv_ready && return 0
  (
    flock 9
    if ! _pinned_venv_ready; then
      if ! "$venv/bin/python" -c "" 2>/dev/null; then
        rm -rf "$venv"
        python3 -m venv "$venv"
      fi
      "$venv/bin/pip" install --quiet --disable-pip-version-check "$@" >&2
      printf '%s\n' "$wanted" >"$stamp"
    fi
  ) 9<"${BASH_SOURCE[0]}"
}
