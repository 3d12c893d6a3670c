#!/usr/bin/env bash
# A window of fresh seeds for both simulators that moves with the commit (docs/RELIABILITY.md):
# fleet-sim and daemon-sim over N seeds from a first seed drawn from the commit's id, so that
# every landing explores seeds no run has tried, beside the fixed ranges. A failing seed is
# named with the command that replays it; it is the daemons' (or the harness's) to fix.
# usage: tests/sim/window.sh BUILD_DIR [N]   (SF_SIM_WINDOW_FIRST=S pins the first seed)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin=$1
n=${2:-200}
first=${SF_SIM_WINDOW_FIRST:-}
if [ -z "$first" ]; then
	commit=$(git -C "$here" rev-parse HEAD 2>/dev/null || true)
	if [ -z "$commit" ]; then
		echo "window: $here is not a git checkout: no commit to draw the window from" >&2
		exit 1
	fi
	# 1,000,000 and up (past CI's fixed ranges): the commit's first 7 hex digits, times 256.
	first=$(( 1000000 + 0x${commit:0:7} * 256 ))
fi
echo "window: seeds $first..$(( first + n - 1 )) of both simulators (commit ${commit:-pinned})"
BUILD_DIR=$bin exec "$here/scripts/sim-soak" --sim both --seeds "$n" --first "$first" --chunk "$n"
