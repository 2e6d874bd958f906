#pragma once
/// ioattn error types. Every public entry validates its input once and throws one of these,
/// with a message that names the function and the offending values.

#include <stdexcept>
#include <string>

namespace ioattn {

/// Base of every exception ioattn throws.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// A caller passed a value outside the documented domain (shape, stride, p, M, spec, file).
class InvalidArgument : public Error {
public:
    using Error::Error;
};

/// A schedule would hold more than M words of fast memory.
class CapacityError : public Error {
public:
    using Error::Error;
};

/// A call needs more memory than it may take (IOATTN_MAX_BYTES, else the machine's physical
/// memory; see ioattn/resources.hpp), or an allocation failed: the message names the call, the
/// bytes needed and the bytes available.
class ResourceError : public Error {
public:
    using Error::Error;
};

} // namespace ioattn

/// Cheap check kept in Release builds: throws ioattn::Error with the message.
#define IOATTN_CHECK(cond, msg)                                                                    \
    do {                                                                                           \
        if (!(cond))                                                                               \
            throw ::ioattn::Error(msg);                                                            \
    } while (false)

#ifndef NDEBUG
#include <cstdio>
#include <cstdlib>
/// Internal invariant, checked in Debug and sanitizer builds only.
#define IOATTN_ASSERT(cond)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);      \
            std::abort();                                                                          \
        }                                                                                          \
    } while (false)
#else
#define IOATTN_ASSERT(cond) ((void)0)
#endif
