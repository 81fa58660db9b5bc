// Host check of the ff/ algorithms without a GPU: compiles the same headers with g++ and the
// PTX carry-flag instructions emulated (CUZK_HOST_EMU), prints inputs and outputs as hex for
// check.py, which recomputes everything with Python integers. Run: ./run.sh
#define CUZK_HOST_EMU 1
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include "../bls12_381.cuh"

using namespace cuzk;

static uint64_t rng_state = 0x123456789abcdefull;
static uint64_t splitmix()
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
template <class T> static bool less_than_mod(const T& x)
{
    for (int i = T::n - 1; i >= 0; i--) {
        if (x.v[i] != T::params::mod(i)) return x.v[i] < T::params::mod(i);
    }
    return false;
}
// random canonical element; kind selects edge cases
template <class T> static void sub_small(T& x, uint32_t s)   // x -= s with borrow
{
    for (int i = 0; i < T::n; i++) {
        uint32_t old = x.v[i];
        x.v[i] = old - s;
        s = old < s ? 1 : 0;
    }
}
template <class T> static T sample(int kind)
{
    T x = T::zero();
    switch (kind) {
    case 0: return T::zero();
    case 1: return T::one();
    case 2: x = T::modulus(); sub_small(x, 1); return x;            // p - 1
    case 3: x = T::modulus(); sub_small(x, 2); return x;            // p - 2
    case 4: {                                                   // 2^k - 1 (random k)
        int k = (int)(splitmix() % (T::params::bits));
        for (int i = 0; i < T::n; i++) {
            int lo = 32 * i;
            x.v[i] = k >= lo + 32 ? 0xffffffffu : (k > lo ? ((1u << (k - lo)) - 1) : 0);
        }
        return x;
    }
    case 5: {                                                   // large limbs near p
        x = T::modulus();
        sub_small(x, 1 + (uint32_t)(splitmix() & 0xff));
        return x;
    }
    default:
        do {
            for (int i = 0; i < T::n; i++) x.v[i] = (uint32_t)splitmix();
            x.v[T::n - 1] &= (1u << (T::params::bits % 32)) - 1;
            // kinds 7, 8: zero low limb(s), so reduction rows meet t0 = 0 (redc_row_special_)
            if (kind == 7 || kind == 8) x.v[0] = 0;
            if (kind == 8) x.v[1] = 0;
        } while (!less_than_mod(x));
        return x;
    }
}
template <class T> static void put(const T& x)
{
    printf(" ");
    for (int i = T::n - 1; i >= 0; i--) printf("%08x", x.v[i]);
}
static void put(const fp2_t& x) { put(x.c0); printf(":"); put(x.c1); }

template <class T> static void field_ops(const char* name, int count)
{
    for (int t = 0; t < count; t++) {
        int ka = t < 36 ? t % 6 : 6 + (t % 7), kb = t < 36 ? t / 6 : 6 + (t % 5);
        T a = sample<T>(ka), b = sample<T>(kb);
        printf("%s mul", name); put(a); put(b); put(a * b); printf("\n");
        printf("%s add", name); put(a); put(b); put(a + b); printf("\n");
        printf("%s sub", name); put(a); put(b); put(a - b); printf("\n");
        printf("%s sqr", name); put(a); put(a.sqr()); printf("\n");
        printf("%s neg", name); put(a); put(-a); printf("\n");
        printf("%s dbl", name); put(a); put(a.dbl()); printf("\n");
        printf("%s canon", name); put(a); put(a.to_canonical()); printf("\n");
        printf("%s tomont", name); put(a); put(a.to_mont()); printf("\n");
    }
}
// wide product / square of arbitrary n-limb integers (not only canonical ones: Fp2 feeds
// unreduced sums < 2p into mul_wide); edge cases all-ones and zero limbs included
template <class T> static T any_limbs(int kind)
{
    T x;
    for (int i = 0; i < T::n; i++) {
        uint32_t r = (uint32_t)splitmix();
        x.v[i] = kind == 0 ? 0xffffffffu : kind == 1 ? (r & 1 ? 0xffffffffu : 0) : kind == 2 ? 0 : r;
    }
    return x;
}
template <class T> static void put_wide(const uint32_t* w)
{
    printf(" ");
    for (int i = 2 * T::n - 1; i >= 0; i--) printf("%08x", w[i]);
}
template <class T> static void wide_ops(const char* name, int count)
{
    for (int t = 0; t < count; t++) {
        T a = any_limbs<T>(t < 16 ? t % 4 : 3), b = any_limbs<T>(t < 16 ? t / 4 : 3);
        uint32_t w[2 * T::n];
        T::mul_wide(w, a, b);
        printf("%s wide", name); put(a); put(b); put_wide<T>(w); printf("\n");
        T::mul_wide_split(w, a, b);
        printf("%s wide", name); put(a); put(b); put_wide<T>(w); printf("\n");
        T::sqr_wide(w, a);
        printf("%s swide", name); put(a); put_wide<T>(w); printf("\n");
    }
}
// Fr's other multiplication row: operator* uses the special low limbs (p[0] = 1,
// p[1] = 2^32 - 1, fr_params::mul_lo_special); this checks the generic row mul_<false> too
static void fr_generic(int count)
{
    for (int t = 0; t < count; t++) {
        int ka = t < 36 ? t % 6 : 6 + (t % 7), kb = t < 36 ? t / 6 : 6 + (t % 5);
        fr_t a = sample<fr_t>(ka), b = sample<fr_t>(kb);
        printf("fr mul"); put(a); put(b); put(fr_t::mul_<false>(a, b)); printf("\n");
    }
}
// Both multiplications of each field whatever operator* is: the Karatsuba product
// (mont_t::mul_karatsuba, Fp's operator*; also on all-ones / zero-limb halves, the edge cases of
// the |a0 - a1| signs, via any canonical 2^k - 1 and p - 1) and the CIOS rows (mont_t::mul_rows,
// what the curve formulas use)
template <class T> static void kara_ops(const char* name, int count)
{
    for (int t = 0; t < count; t++) {
        int ka = t < 36 ? t % 6 : 6 + (t % 7), kb = t < 36 ? t / 6 : 6 + (t % 5);
        T a = sample<T>(ka), b = sample<T>(kb);
        printf("%s mul", name); put(a); put(b); put(T::mul_karatsuba(a, b)); printf("\n");
        printf("%s mul", name); put(a); put(b); put(T::mul_rows(a, b)); printf("\n");
        uint32_t w[2 * T::n];
        T::mul_wide_karatsuba(w, a, b);
        printf("%s wide", name); put(a); put(b); put_wide<T>(w); printf("\n");
    }
}
static void fp2_ops(int count)
{
    for (int t = 0; t < count; t++) {
        int k0 = t < 36 ? t % 6 : 6, k1 = t < 36 ? t / 6 : 6;
        fp2_t a{sample<fp_t>(k0), sample<fp_t>(k1)};
        fp2_t b{sample<fp_t>((k0 + 3) % 7), sample<fp_t>(t % 7)};
        printf("fp2 mul"); put(a); put(b); put(a * b); printf("\n");
        printf("fp2 mul"); put(a); put(b); put(fp2_t::mul_split(a, b)); printf("\n");
        printf("fp2 sqr"); put(a); put(a.sqr()); printf("\n");
        printf("fp2 add"); put(a); put(b); put(a + b); printf("\n");
        printf("fp2 sub"); put(a); put(b); put(a - b); printf("\n");
    }
}

int main(int argc, char** argv)
{
    int count = argc > 1 ? atoi(argv[1]) : 2000;
    field_ops<fr_t>("fr", count);
    field_ops<fp_t>("fp", count);
    fp2_ops(count);
    fr_generic(count);
    kara_ops<fp_t>("fp", count);
    kara_ops<fr_t>("fr", count);
    wide_ops<fr_t>("fr", count);
    wide_ops<fp_t>("fp", count);
    return 0;
}
