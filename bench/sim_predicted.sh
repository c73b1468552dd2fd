#!/usr/bin/env bash
# docs/algorithms.md's "Simulated" tables: ringtree-sim at 2 to 128 hosts of
# 8 ranks, each cell the simulated time with the closed form's beside it.
#   bench/sim_predicted.sh [BUILD_DIR]   (docs/figures.sh runs it)
set -eu
build=${1:-build}
sim="$build/tools/ringtree-sim"
net=(--alpha-us 1 --gbps 160 --gamma-ns 0.05 --net-alpha-us 5 --net-gbps 100)
algos=ring,tree,recursive_doubling,rabenseifner,hierarchical,automatic
echo "Each row: ringtree-sim --hosts H --per-host 8 ${net[*]} -a $algos -b SIZE -e SIZE"
for size in 64K 16M 256M; do
  echo
  echo "$size bytes, simulated (closed form):"
  echo
  echo "| hosts x ranks | ring | tree | recursive_doubling | rabenseifner | hierarchical | automatic runs |"
  echo "|---:|---:|---:|---:|---:|---:|---|"
  for hosts in 2 4 8 16 32 64 128; do
    "$sim" --hosts "$hosts" --per-host 8 "${net[@]}" -a "$algos" -b "$size" -e "$size" |
      awk -v h="$hosts" '
        function t(us) { return us < 1000 ? sprintf("%.1f us", us) : us < 1e6 ? sprintf("%.2f ms", us / 1000) : sprintf("%.2f s", us / 1e6) }
        /^#/ || /size\(B\)/ { next }
        { name = $5; sim = $6; model = $9
          if (name ~ /^automatic:/) { auto = substr(name, 11); next }
          cell[name] = t(sim) " (" t(model) ")"; v[name] = sim }
        END {
          best = ""; for (k in v) if (best == "" || v[k] < v[best]) best = k
          printf "| %d x 8 |", h
          split("ring tree recursive_doubling rabenseifner hierarchical", order, " ")
          for (i = 1; i <= 5; i++) printf(order[i] == best ? " **%s** |" : " %s |", cell[order[i]])
          printf " %s |\n", auto
        }'
  done
done
