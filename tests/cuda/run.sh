#!/usr/bin/env bash
# Skip (exit 77) without a usable GPU; otherwise run the CUDA suite (it forks its ranks).
probe=$1; exe=$2
"$probe" || exit 77
exec "$exe"
