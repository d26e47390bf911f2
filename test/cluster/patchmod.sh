#!/usr/bin/env bash
# Puts a patched copy of a module that a tool module requires in place for
# a build: copies the module, at the version the tool module pins, from the
# module cache into <dir>/<last element of its path>, applies <patch> to it
# (patch -p1, else git apply -p1), and writes <modfile>, the tool module's
# go.mod with a replace of the module by the copy (its go.sum beside it, as
# <modfile without .mod>.sum). Build with go build -modfile <modfile> in
# the tool module's directory. build.sh, build-services.sh and
# build-natss.sh use it.
#
# Usage: patchmod.sh <tool module dir> <module> <patch> <dir> <modfile>
set -euo pipefail
GO="${GO:-go}"
tools="$1" module="$2" patchfile="$3" dir="$4" modfile="$5"

version="$(cd "$tools" && "$GO" list -m -f '{{.Version}}' "$module")"
src="$(cd "$tools" && "$GO" mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -d $src ]] || { echo "patchmod: no $module@$version in the module cache" >&2; exit 1; }
copy="$dir/${module##*/}"
rm -rf "$copy"
cp -R "$src" "$copy"
chmod -R u+w "$copy"
if command -v patch >/dev/null; then
	patch -s -p1 -d "$copy" <"$patchfile"
else
	(cd "$copy" && GIT_CEILING_DIRECTORIES="$dir" git apply -p1 "$patchfile")
fi
cp "$tools/go.mod" "$modfile"
cp "$tools/go.sum" "${modfile%.mod}.sum"
printf '\nreplace %s => %s\n' "$module" "$copy" >>"$modfile"
