// base/thread_annotations.h: lock discipline the compiler checks.
//
// Clang's thread-safety analysis (-Wthread-safety) reads these attributes:
// a field marked FRS_GUARDED_BY(mu) may only be touched with mu held, a
// function marked FRS_REQUIRES(mu) only called with it held, and so on. The
// project's CI builds once with clang and the warning as an error (the
// "tsa" preset), so a comment about a lock is a claim the build proves.
// GCC knows none of them: there they expand to nothing.
#pragma once

#if defined(__clang__)
#define FRS_TSA(x) __attribute__((x))
#else
#define FRS_TSA(x)
#endif

#define FRS_CAPABILITY(name) FRS_TSA(capability(name))
#define FRS_SCOPED_CAPABILITY FRS_TSA(scoped_lockable)
#define FRS_GUARDED_BY(mu) FRS_TSA(guarded_by(mu))
#define FRS_PT_GUARDED_BY(mu) FRS_TSA(pt_guarded_by(mu))
#define FRS_REQUIRES(...) FRS_TSA(requires_capability(__VA_ARGS__))
#define FRS_ACQUIRE(...) FRS_TSA(acquire_capability(__VA_ARGS__))
#define FRS_TRY_ACQUIRE(...) FRS_TSA(try_acquire_capability(__VA_ARGS__))
#define FRS_RELEASE(...) FRS_TSA(release_capability(__VA_ARGS__))
#define FRS_EXCLUDES(...) FRS_TSA(locks_excluded(__VA_ARGS__))
#define FRS_RETURN_CAPABILITY(x) FRS_TSA(lock_returned(x))
#define FRS_NO_THREAD_SAFETY_ANALYSIS FRS_TSA(no_thread_safety_analysis)
