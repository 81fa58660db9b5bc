// cuzk: thin wrappers over the PTX carry-chain instructions used by the field arithmetic.
//
// Every wrapper is a single `asm volatile` statement. The carry flag (CC) lives between
// statements: a chain is a run of consecutive calls that starts with a `*_cc` instruction that
// ignores the incoming carry (add_cc, sub_cc, mad_lo_cc, ...) and continues with `*c*` ones.
// Volatile keeps the statements in program order; ordinary C++ arithmetic placed between two
// links of a chain never emits a `.cc` PTX instruction, so it cannot clobber the flag.
// (This is the technique of supranational/sppark's mont_t.cuh.)
#pragma once

#include <cstdint>

#if defined(CUZK_HOST_EMU)
// Host emulation of the PTX carry-flag instructions, for checking the algorithms on a machine
// without a GPU (host_emu/ in this folder compiles the same headers with g++). Not used by
// nvcc builds.
#include <cstring>
#define CUZK_DEV inline
#ifndef __device__
#define __device__
#define __constant__
#define __align__(x) alignas(x)
#endif
inline uint32_t __umulhi(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
inline uint32_t __funnelshift_l(uint32_t lo, uint32_t hi, uint32_t s)
{ return (uint32_t)((((uint64_t)hi << 32 | lo) << (s & 31)) >> 32); }

namespace cuzk {
namespace ptx {
inline uint32_t& cc_flag() { static thread_local uint32_t f = 0; return f; }
inline uint32_t emu_add(uint64_t x, bool set) { if (set) cc_flag() = (uint32_t)(x >> 32); return (uint32_t)x; }
inline uint32_t emu_sub(uint64_t a, uint64_t b, bool set)
{ uint64_t x = a - b; if (set) cc_flag() = (a < b); return (uint32_t)x; }
inline uint32_t add_cc(uint32_t a, uint32_t b) { return emu_add((uint64_t)a + b, true); }
inline uint32_t addc_cc(uint32_t a, uint32_t b) { return emu_add((uint64_t)a + b + cc_flag(), true); }
inline uint32_t addc(uint32_t a, uint32_t b) { return emu_add((uint64_t)a + b + cc_flag(), false); }
inline uint32_t sub_cc(uint32_t a, uint32_t b) { return emu_sub(a, b, true); }
inline uint32_t subc_cc(uint32_t a, uint32_t b) { return emu_sub(a, (uint64_t)b + cc_flag(), true); }
inline uint32_t subc(uint32_t a, uint32_t b) { return emu_sub(a, (uint64_t)b + cc_flag(), false); }
inline uint64_t wmul(uint32_t a, uint32_t b) { return (uint64_t)a * b; }
inline void mad_lo_cc(uint32_t& acc, uint32_t a, uint32_t b) { acc = emu_add((uint64_t)(uint32_t)wmul(a, b) + acc, true); }
inline void mad_hi_cc(uint32_t& acc, uint32_t a, uint32_t b) { acc = emu_add((wmul(a, b) >> 32) + acc, true); }
inline void madc_lo_cc(uint32_t& acc, uint32_t a, uint32_t b) { acc = emu_add((uint64_t)(uint32_t)wmul(a, b) + acc + cc_flag(), true); }
inline void madc_hi_cc(uint32_t& acc, uint32_t a, uint32_t b) { acc = emu_add((wmul(a, b) >> 32) + acc + cc_flag(), true); }
inline void madc_hi(uint32_t& acc, uint32_t a, uint32_t b) { acc = emu_add((wmul(a, b) >> 32) + acc + cc_flag(), false); }
inline uint32_t madc_hi_0(uint32_t a, uint32_t b) { return emu_add((wmul(a, b) >> 32) + cc_flag(), false); }
inline void addc_0(uint32_t& acc) { acc = emu_add((uint64_t)acc + cc_flag(), false); }
inline void addc_0_cc(uint32_t& acc) { acc = emu_add((uint64_t)acc + cc_flag(), true); }
inline uint32_t carry_out() { return cc_flag(); }
inline uint32_t madc_lo_cc3(uint32_t a, uint32_t b, uint32_t c) { return emu_add((uint64_t)(uint32_t)wmul(a, b) + c + cc_flag(), true); }
inline uint32_t madc_hi_cc3(uint32_t a, uint32_t b, uint32_t c) { return emu_add((wmul(a, b) >> 32) + c + cc_flag(), true); }
inline uint32_t madc_lo_cc_0(uint32_t a, uint32_t b) { return emu_add((uint64_t)(uint32_t)wmul(a, b) + cc_flag(), true); }
inline uint32_t borrow_mask() { return 0u - cc_flag(); }
} // namespace ptx
} // namespace cuzk
#else
#define CUZK_DEV __device__ __forceinline__

namespace cuzk {
namespace ptx {

// ---- add / sub ------------------------------------------------------------------------------
CUZK_DEV uint32_t add_cc(uint32_t a, uint32_t b)
{ uint32_t r; asm volatile("add.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
CUZK_DEV uint32_t addc_cc(uint32_t a, uint32_t b)
{ uint32_t r; asm volatile("addc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
CUZK_DEV uint32_t addc(uint32_t a, uint32_t b)
{ uint32_t r; asm volatile("addc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
CUZK_DEV uint32_t sub_cc(uint32_t a, uint32_t b)
{ uint32_t r; asm volatile("sub.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
CUZK_DEV uint32_t subc_cc(uint32_t a, uint32_t b)
{ uint32_t r; asm volatile("subc.cc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }
CUZK_DEV uint32_t subc(uint32_t a, uint32_t b)
{ uint32_t r; asm volatile("subc.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b)); return r; }

// ---- multiply-add: acc (+)= lo/hi(a*b) [+ carry] ------------------------------------------------
CUZK_DEV void mad_lo_cc(uint32_t& acc, uint32_t a, uint32_t b)
{ asm volatile("mad.lo.cc.u32 %0, %1, %2, %0;" : "+r"(acc) : "r"(a), "r"(b)); }
CUZK_DEV void mad_hi_cc(uint32_t& acc, uint32_t a, uint32_t b)
{ asm volatile("mad.hi.cc.u32 %0, %1, %2, %0;" : "+r"(acc) : "r"(a), "r"(b)); }
CUZK_DEV void madc_lo_cc(uint32_t& acc, uint32_t a, uint32_t b)
{ asm volatile("madc.lo.cc.u32 %0, %1, %2, %0;" : "+r"(acc) : "r"(a), "r"(b)); }
CUZK_DEV void madc_hi_cc(uint32_t& acc, uint32_t a, uint32_t b)
{ asm volatile("madc.hi.cc.u32 %0, %1, %2, %0;" : "+r"(acc) : "r"(a), "r"(b)); }
CUZK_DEV void madc_hi(uint32_t& acc, uint32_t a, uint32_t b)
{ asm volatile("madc.hi.u32 %0, %1, %2, %0;" : "+r"(acc) : "r"(a), "r"(b)); }
// fresh destination: r = hi(a*b) + carry, no carry out (caller proves it cannot overflow)
CUZK_DEV uint32_t madc_hi_0(uint32_t a, uint32_t b)
{ uint32_t r; asm volatile("madc.hi.u32 %0, %1, %2, 0;" : "=r"(r) : "r"(a), "r"(b)); return r; }
// three-operand forms with a separate destination: r = lo/hi(a*b) + c + carry, carry out.
// Used by the even/odd-split multiplication to shift an accumulator by two limbs while adding,
// so that (lo, hi) results always land in an aligned register pair (IMAD.WIDE, no MOVs).
CUZK_DEV uint32_t madc_lo_cc3(uint32_t a, uint32_t b, uint32_t c)
{ uint32_t r; asm volatile("madc.lo.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
CUZK_DEV uint32_t madc_hi_cc3(uint32_t a, uint32_t b, uint32_t c)
{ uint32_t r; asm volatile("madc.hi.cc.u32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); return r; }
// fresh destination: r = lo(a*b) + carry, carry out
CUZK_DEV uint32_t madc_lo_cc_0(uint32_t a, uint32_t b)
{ uint32_t r; asm volatile("madc.lo.cc.u32 %0, %1, %2, 0;" : "=r"(r) : "r"(a), "r"(b)); return r; }
// acc += carry (ends a chain)
CUZK_DEV void addc_0(uint32_t& acc)
{ asm volatile("addc.u32 %0, %0, 0;" : "+r"(acc)); }
// acc += carry, carry out
CUZK_DEV void addc_0_cc(uint32_t& acc)
{ asm volatile("addc.cc.u32 %0, %0, 0;" : "+r"(acc)); }
// r = carry (0 or 1)
CUZK_DEV uint32_t carry_out()
{ uint32_t r; asm volatile("addc.u32 %0, 0, 0;" : "=r"(r)); return r; }
// r = 0 - borrow (0 or 0xffffffff)
CUZK_DEV uint32_t borrow_mask()
{ uint32_t r; asm volatile("subc.u32 %0, 0, 0;" : "=r"(r)); return r; }

} // namespace ptx
} // namespace cuzk
#endif // CUZK_HOST_EMU
