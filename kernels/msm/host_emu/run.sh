#!/bin/sh
# Host emulation checks of kernels/msm/scan.cuh and kernels/msm/sort.cuh (no GPU needed): g++ only.
set -e
cd "$(dirname "$0")"
g++ -std=c++20 -O2 -pthread -Wno-unknown-pragmas -o /tmp/cuzk_msm_scan_emu scan_emu.cpp
g++ -std=c++20 -O2 -pthread -Wno-unknown-pragmas -o /tmp/cuzk_msm_sort_emu sort_emu.cpp
/tmp/cuzk_msm_scan_emu "$@"
/tmp/cuzk_msm_sort_emu
