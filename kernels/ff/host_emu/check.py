#!/usr/bin/env python3
"""Checks field_emu's output against Python integers (Montgomery semantics)."""
import sys
R_ = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
P_ = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
F = {"fr": (R_, 256), "fp": (P_, 384)}

def check_line(line):
    f = line.split()
    name, op, vals = f[0], f[1], f[2:]
    if name == "fp2":
        p, bits = F["fp"]
        Ri = pow(1 << bits, -1, p)
        toks = " ".join(vals).replace(": ", ":").split()
        v = [tuple(int(c, 16) for c in t.split(":")) for t in toks]
        def mul(a, b):
            return ((a[0]*b[0] - a[1]*b[1]) * Ri % p, (a[0]*b[1] + a[1]*b[0]) * Ri % p)
        if op == "mul": exp = mul(v[0], v[1]); got = v[2]
        elif op == "sqr": exp = mul(v[0], v[0]); got = v[1]
        elif op == "add": exp = ((v[0][0]+v[1][0]) % p, (v[0][1]+v[1][1]) % p); got = v[2]
        elif op == "sub": exp = ((v[0][0]-v[1][0]) % p, (v[0][1]-v[1][1]) % p); got = v[2]
        return exp == got, exp, got
    p, bits = F[name]
    Rm = 1 << bits
    Ri = pow(Rm, -1, p)
    v = [int(x, 16) for x in vals]
    a = v[0]
    if op == "wide": exp = a * v[1]; got = v[2]
    elif op == "swide": exp = a * a; got = v[1]
    elif op == "mul": exp = a * v[1] * Ri % p; got = v[2]
    elif op == "add": exp = (a + v[1]) % p; got = v[2]
    elif op == "sub": exp = (a - v[1]) % p; got = v[2]
    elif op == "sqr": exp = a * a * Ri % p; got = v[1]
    elif op == "neg": exp = (-a) % p; got = v[1]
    elif op == "dbl": exp = 2 * a % p; got = v[1]
    elif op == "canon": exp = a * Ri % p; got = v[1]
    elif op == "tomont": exp = a * Rm % p; got = v[1]
    else: raise SystemExit("unknown op " + op)
    return exp == got, exp, got

bad = 0; n = 0; per = {}
for line in sys.stdin:
    if not line.strip(): continue
    ok, exp, got = check_line(line)
    n += 1
    key = " ".join(line.split()[:2]); per[key] = per.get(key, 0) + 1
    if not ok:
        bad += 1
        if bad < 10: print("MISMATCH", line.strip(), "expected", exp if isinstance(exp, tuple) else hex(exp))
print(f"{n} checks, {bad} mismatches; per op: {per}")
sys.exit(1 if bad else 0)
