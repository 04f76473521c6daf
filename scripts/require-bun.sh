#!/bin/sh
# Fails loudly when node_modules has no working Bun after an install. Bun arrives through the
# `bun` package's install script; an npm that blocks install scripts not approved in
# package.json's "allowScripts" (npm 12, or npm 11 with --strict-allow-scripts) leaves only
# a stub that errors. Used by .ci/run right after `npm ci`.
#   scripts/require-bun.sh [project-dir]
dir=${1:-.}
bun="$dir/node_modules/.bin/bun"
if version=$("$bun" --version 2>/dev/null); then
  echo "bun $version"
  exit 0
fi
echo "bun is missing or broken after the install ($bun does not run)." >&2
echo "Its install script must run: package.json's \"allowScripts\" must approve \"bun\"" >&2
echo "(npm install-scripts approve bun), and the install must not use --ignore-scripts." >&2
exit 1
