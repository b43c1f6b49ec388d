# Sourced by the shell tests: `check DESCRIPTION CONDITION...` prints ok/FAILED and counts
# the failures in $failures; contains/not_contains FILE TEXT are conditions for it.
failures=0
check() {
  local description=$1
  shift
  if "$@"; then echo "ok: $description"; else echo "FAILED: $description"; failures=$((failures + 1)); fi
}
contains() { grep -qF -- "$2" "$1"; }
not_contains() { ! grep -qF -- "$2" "$1"; }
