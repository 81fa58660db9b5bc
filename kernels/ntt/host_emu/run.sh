#!/bin/sh
# Host run of the NTT kernels (kernels/ntt/ntt.cu) against the CPU reference, no GPU needed:
# cuzk-ntt writes test vectors, g++ compiles the CUDA sources with emulated threads.
set -e
cd "$(dirname "$0")"
DIR=${1:-/tmp/cuzk_ntt_dump}
# The vectors need no device kernels: skip the fatbin build (minutes for every arch).
(cd ../../.. && CUZK_NO_CUDA=1 CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/h-ntt-cpu}" CUZK_NTT_DUMP="$DIR" cargo test --release -p cuzk-ntt --lib dump_host_emu_vectors -- --ignored --quiet)
g++ -std=c++20 -O2 -pthread -I ../.. -Wno-unknown-pragmas -o /tmp/cuzk_ntt_emu ntt_emu.cpp
/tmp/cuzk_ntt_emu "$DIR"
