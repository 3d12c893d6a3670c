#!/usr/bin/env bash
# Runs a simulator on each seed named: tests/sim/seeds.sh PROGRAM SEED...; fails at the first
# that breaks, naming it.
set -euo pipefail
prog=$1
shift
for seed in "$@"; do
	"$prog" --seed "$seed" || { echo "seeds.sh: seed $seed broke ($prog --seed $seed -v)"; exit 1; }
done
echo "seeds.sh: seeds $* held"
