// Running the ioattn program from the tests (see cli.hpp): std::system with stdout and stderr
// redirected to scratch files, decoded with the POSIX wait macros.

#include "cli.hpp"

#include <catch2/catch.hpp>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include <sys/wait.h>

namespace ioattn::app::test {

namespace {

/// Owns the scratch directory; its destructor (at exit) removes it.
class ScratchDir {
public:
    ScratchDir() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "ioattn_tests_apps.XXXXXX").string();
        if (::mkdtemp(pattern.data()) == nullptr)
            throw std::runtime_error("ioattn_tests_apps: mkdtemp failed for " + pattern);
        path_ = pattern;
    }

    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }

    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    [[nodiscard]] const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

std::string quoted(const std::string& s) {
    std::string q = "'";
    for (const char c : s) {
        if (c == '\'')
            q += "'\\''";
        else
            q += c;
    }
    return q + "'";
}

std::string slurp(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

} // namespace

const std::filesystem::path& scratch_dir() {
    static const ScratchDir dir;
    return dir.path();
}

std::string write_scratch(const std::string& name, const std::string& content) {
    const std::filesystem::path path = scratch_dir() / name;
    std::ofstream(path, std::ios::binary) << content;
    return path.string();
}

std::string command_of(const std::vector<std::string>& args) {
    std::string cmd = quoted(IOATTN_BINARY);
    for (const auto& a : args)
        cmd += " " + quoted(a);
    return cmd;
}

Outcome
run_ioattn(const std::vector<std::string>& args, const Env& env, const std::string& launcher) {
    static int calls = 0;
    ++calls;
    const std::filesystem::path out = scratch_dir() / ("stdout_" + std::to_string(calls));
    const std::filesystem::path err = scratch_dir() / ("stderr_" + std::to_string(calls));
    std::string prefix;
    for (const auto& [name, value] : env)
        prefix += (prefix.empty() ? "env " : " ") + quoted(name + "=" + value);
    if (!launcher.empty())
        prefix += (prefix.empty() ? "" : " ") + launcher;
    const std::string cmd = (prefix.empty() ? "" : prefix + " ") + command_of(args) +
                            " < /dev/null > " + quoted(out.string()) + " 2> " +
                            quoted(err.string());
    const int raw = std::system(cmd.c_str());
    Outcome r;
    if (raw == -1)
        r.status = -1;
    else if (WIFEXITED(raw))
        r.status = WEXITSTATUS(raw);
    else if (WIFSIGNALED(raw))
        r.status = 128 + WTERMSIG(raw);
    r.out = slurp(out);
    r.err = slurp(err);
    std::error_code ec;
    std::filesystem::remove(out, ec);
    std::filesystem::remove(err, ec);
    return r;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
        lines.push_back(line);
    return lines;
}

std::vector<std::string> csv_fields(const std::string& line) {
    std::vector<std::string> fields(1);
    bool quoted_field = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        if (quoted_field) {
            if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
                fields.back() += '"';
                ++i;
            } else if (c == '"') {
                quoted_field = false;
            } else {
                fields.back() += c;
            }
        } else if (c == '"') {
            quoted_field = true;
        } else if (c == ',') {
            fields.emplace_back();
        } else {
            fields.back() += c;
        }
    }
    return fields;
}

bool has_word(const std::string& text, const std::string& word, bool ignore_case) {
    const auto fold = [&](char c) {
        return ignore_case ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : c;
    };
    const auto is_word = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
    };
    for (std::size_t i = 0; i + word.size() <= text.size(); ++i) {
        bool same = true;
        for (std::size_t k = 0; k < word.size() && same; ++k)
            same = fold(text[i + k]) == fold(word[k]);
        const bool starts = i == 0 || !is_word(text[i - 1]);
        const bool ends = i + word.size() == text.size() || !is_word(text[i + word.size()]);
        if (same && starts && ends)
            return true;
    }
    return false;
}

void require_one_line_error(const std::vector<std::string>& args,
                            const std::string& names,
                            int status,
                            const Env& env) {
    const Outcome r = run_ioattn(args, env);
    INFO("command: " << command_of(args));
    INFO("stderr: " << r.err);
    CHECK(r.status == status);
    CHECK(r.out.empty());
    REQUIRE(!r.err.empty());
    CHECK(r.err.back() == '\n');
    CHECK(lines_of(r.err).size() == 1);
    CHECK(r.err.rfind("ioattn: ", 0) == 0);
    CHECK(r.err.find(names) != std::string::npos);
}

} // namespace ioattn::app::test
