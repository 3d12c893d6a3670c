#!/usr/bin/env bash
# Each program's --version says project(VERSION) from the top CMakeLists.txt, so the version
# the programs print cannot drift from the packages' again.
# Usage: version.sh VERSION PROGRAM...   (the first line of PROGRAM --version: "NAME VERSION ...")
set -uo pipefail
version=$1; shift
fails=0
for prog in "$@"; do
	name=$(basename "$prog")
	out=$("$prog" --version 2>&1); rc=$?
	first=${out%%$'\n'*}
	if [ "$rc" = 0 ] && { [ "$first" = "$name $version" ] || [[ $first == "$name $version "* ]]; }; then
		echo "ok   $name --version: $first"
	else
		echo "FAIL $name --version (exit $rc) says '$first', not '$name $version'"
		fails=$((fails + 1))
	fi
done
[ "$fails" -eq 0 ]
