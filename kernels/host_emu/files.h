// Test vectors of the kernel emulators: files of fixed-size records that the Rust tests write
// into one folder (`emu_dir`, the emulator's first argument).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <vector>

static const char* emu_dir = ".";

template <class T> std::vector<T> load(const char* name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", emu_dir, name);
    FILE* f = fopen(p, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", p);
        exit(2);
    }
    std::vector<T> v;
    T x;
    while (fread(&x, sizeof(T), 1, f) == 1) v.push_back(x);
    fclose(f);
    return v;
}
