# Sourced by the trace lab's shell tests: strict mode, BUILD_DIR (and SOURCE_DIR) from the
# arguments, `ak`, a scratch folder removed at exit (the current directory), step and fail.
set -euo pipefail
build=$(realpath "$1")
src=$(realpath "${2:-.}")
ak="$build/allockit"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
step() { printf '== %s\n' "$*"; }
fail() {
  echo "FAIL: $*"
  exit 1
}
