#pragma once
// IOATTN_SANITIZED is defined when a sanitizer instruments this translation unit: the program's
// operator new (measure/aligned_new.cpp) then leaves the runtime's own in place, and its test
// skips. GCC tells a sanitizer by these macros, clang by __has_feature.

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define IOATTN_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define IOATTN_SANITIZED 1
#endif
#endif
