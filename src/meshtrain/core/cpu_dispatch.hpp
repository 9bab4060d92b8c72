#pragma once
// Instruction sets chosen at run time, so one binary runs at full speed on
// every x86-64 host of a job (the build is for baseline x86-64 unless
// MESHTRAIN_NATIVE=ON).
//
// MESHTRAIN_HOT_LOOP before a function's definition compiles it (and the
// OpenMP regions and inline helpers inside it) three times: for x86-64-v4
// (AVX-512), x86-64-v3 (AVX2, FMA) and the baseline; the dynamic loader
// picks the best the CPU has, once, through GCC's target_clones. The GEMMs
// need none of this: oneDNN dispatches by itself, and the packed AVX-512
// kernel carries its own target attribute behind a CPU check.
//
// A -march=native build (MESHTRAIN_NATIVE_BUILD) has one code path for its
// own CPU and no clones.
//
// The clones round alike only on one instruction set (FMA contracts a * b + c
// into one rounding, wider vectors sum in another order): hosts with
// different instruction sets agree to float rounding, not bit for bit.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(MESHTRAIN_NATIVE_BUILD)
#define MESHTRAIN_HOT_LOOP __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MESHTRAIN_HOT_LOOP
#endif

// For a function written in AVX512-BF16 intrinsics (vdpbf16ps,
// vcvtneps2bf16), called only behind a run-time check that the CPU has them.
#define MESHTRAIN_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
