// The timing engine's numbers, named in one place (docs/timing.md says why each is what it is).
#pragma once

namespace dlb::harness::timing {

// Repetitions per case: 5 a side is the fewest with which compare's Mann-Whitney test can reach p < 0.05.
inline constexpr int kRepetitions = 5;
// Seconds per repetition when the case does not fix its iterations (--min-time).
inline constexpr double kMinTime = 0.1;
inline constexpr double kMinTimeQuick = 0.02;
// Noisy retry: a case whose repetitions' cv exceeds kMaxCv gets kNoisyRetryFactor times its
// repetitions, at most kMaxRepetitions (not with --quick).
inline constexpr double kMaxCv = 0.05;
inline constexpr int kNoisyRetryFactor = 2;
inline constexpr int kMaxRepetitions = 20;
// Warm-up before a case's first repetition: min(kWarmUpCap, min_time) seconds; before a later one,
// when other cases ran in between (interleaved), a kLaterWarmUpShare of that: enough to bring the
// case's data back into the caches.
inline constexpr double kWarmUpCap = 0.05;
inline constexpr double kLaterWarmUpShare = 0.2;
// Tiny cases: an iteration under kTinyBelow seconds is dominated by the timer and cache state; it
// gets repetitions of at least kTinyMinTime (kTinyMinTimeQuick with --quick) unless --min-time is given.
inline constexpr double kTinyBelow = 1e-3;
inline constexpr double kTinyMinTime = 0.2;
inline constexpr double kTinyMinTimeQuick = 0.05;
// Interleaved windows: at most kWindowCases cases set up together, holding at most kWindowBytes of
// anonymous memory (ours and our children's: harness::held_bytes) and kWindowFreeShare of the
// memory free when the run starts. Memory a neighbour holds is not neutral: on the 2-vCPU Firecracker
// VM (page reporting) the PyTorch peer's gpt2-124m step, which maps and faults ~0.6 GB a step, took
// 1.63-1.80 s alone and 2.0-2.9 s beside a process holding 3.5-5 GB (2-2.5 GB: no change); the old
// 4 GB bound timed it beside ours and the other peer, 11 GB in all, and read 2.04 s
// (docs/notes/2026-11-27-peer-memory.md). Cases holding more than this are timed back to back.
inline constexpr int kWindowCases = 16;
inline constexpr double kWindowBytes = 2e9;
inline constexpr double kWindowFreeShare = 0.25;
// CPU % of peak: before each round of a window timing CPU cases that count FLOPs, the FMA peak is
// probed again with kWindowProbeReps (cpu::fma_peak_gflops: 3 tries of ~10 ms at AVX-512); their
// % of peak is against the window's largest probe (a shared machine's load comes and goes; a
// neighbour's burst only lowers a probe).
inline constexpr long kWindowProbeReps = 100;

}  // namespace dlb::harness::timing
