#!/usr/bin/env bash
# Skip (exit 77) without a usable GPU; otherwise run the CUDA suite under mpirun.
probe=$1; np=$2; exe=$3
"$probe" || exit 77
exec mpirun --oversubscribe -np "$np" "$exe"
