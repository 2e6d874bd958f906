#pragma once
// Sets an environment variable for the lifetime of a test scope and restores it after (the
// memory-limit tests set IOATTN_MAX_BYTES). Tests run their cases serially, so the process's
// environment is not read by anyone else meanwhile.

#include <cstdlib>
#include <optional>
#include <string>

namespace ioattn::test {

class ScopedEnv {
public:
    /// Sets `name` to `value`, or unsets it when value is nullopt.
    ScopedEnv(std::string name, const std::optional<std::string>& value)
        : name_(std::move(name)) {
        if (const char* old = std::getenv(name_.c_str()))
            old_ = old;
        set(value);
    }

    ~ScopedEnv() { set(old_); }

    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    void set(const std::optional<std::string>& value) const {
        if (value)
            ::setenv(name_.c_str(), value->c_str(), 1);
        else
            ::unsetenv(name_.c_str());
    }

    std::string name_;
    std::optional<std::string> old_;
};

} // namespace ioattn::test
