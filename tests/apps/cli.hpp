#pragma once
// Test helpers of ioattn_tests_apps: run the built `ioattn` program (its path is the compile
// definition IOATTN_BINARY) in a shell, with stdout and stderr captured through files in a
// private scratch directory, and small parsers for what it prints.

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace ioattn::app::test {

/// What one run of the program produced.
struct Outcome {
    int status = -1; ///< exit status; 128 + signal if it was killed
    std::string out; ///< stdout
    std::string err; ///< stderr
};

/// A directory of this process for scratch files, removed when the process exits.
const std::filesystem::path& scratch_dir();

/// Writes `content` to scratch_dir() / name and returns the path.
std::string write_scratch(const std::string& name, const std::string& content);

/// The shell command line of `ioattn args...`, each argument single-quoted (for CAPTURE).
std::string command_of(const std::vector<std::string>& args);

/// Environment variables set for one run (NAME, value).
using Env = std::vector<std::pair<std::string, std::string>>;

/// Runs `ioattn args...` (with `env` added to the environment) and waits for it; a non-empty
/// `launcher` (e.g. "mpiexec -n 2") is put in front of the command line as it is.
Outcome run_ioattn(const std::vector<std::string>& args,
                   const Env& env = {},
                   const std::string& launcher = "");

/// The lines of `text`, without their '\n'.
std::vector<std::string> lines_of(const std::string& text);

/// The fields of one CSV line (RFC 4180 quoting: "a,b" is one field, "" an escaped quote).
std::vector<std::string> csv_fields(const std::string& line);

/// Whether `word` occurs in `text` as a whole word (not inside a longer run of letters, digits
/// or '_'), ignoring case when `ignore_case`.
bool has_word(const std::string& text, const std::string& word, bool ignore_case);

/// Asserts the program rejects `args` with exit status `status`, nothing on stdout and exactly
/// one line on stderr, "ioattn: ...", which contains `names` (the offending token or value).
void require_one_line_error(const std::vector<std::string>& args,
                            const std::string& names,
                            int status = 2,
                            const Env& env = {});

} // namespace ioattn::app::test
