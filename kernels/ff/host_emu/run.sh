#!/bin/sh
# Host emulation check of kernels/ff (no GPU needed): g++ + Python.
set -e
cd "$(dirname "$0")"
g++ -std=c++17 -O2 -Wno-unknown-pragmas -o /tmp/cuzk_field_emu field_emu.cpp
/tmp/cuzk_field_emu "${1:-2000}" | python3 check.py
