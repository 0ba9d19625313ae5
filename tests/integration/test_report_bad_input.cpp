// gpuleak-report on input it cannot trust: a real trace cut short or with single bytes overwritten,
// random bytes, an empty file, a directory without traces, a missing file, and its own usage errors.
// Whatever the input, the report must not crash. It either refuses the input (exit status 2, nothing on
// stdout, exactly one line on stderr that names the file) or reports on it (exit status 0; the JSON
// parses). Text and JSON must make the same decision.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuleak/trace_format.h"
#include "traced_run.h"

using nlohmann::json;

namespace {

using Bytes = std::vector<unsigned char>;
using gpuleak::format::FileHeader;

Bytes read_bytes(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const Bytes& bytes, size_t count) {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(count));
    REQUIRE(file.good());
}

void write_bytes(const std::string& path, const Bytes& bytes) {
    write_bytes(path, bytes, bytes.size());
}

// A complete trace of scenario_leak in the smallest file the recorder makes. One frame per stack: the
// reader's checks are the same at any depth, but symbolizing the C library's frames (compressed debug
// info) costs tens of milliseconds per report, and these tests run hundreds of reports.
Bytes make_trace(const TempDir& dir) {
    RunOptions options;
    options.environment = {"GPULEAK_MAX_MB=4", "GPULEAK_STACK_DEPTH=1", "GPULEAK_QUIET=1"};
    TracedRun run = run_traced(dir, program_path("scenario_leak"), {"20"}, options);
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    REQUIRE(run.traces().size() == 1);
    Bytes trace = read_bytes(run.traces()[0]);
    REQUIRE(trace.size() >= gpuleak::format::kHeaderBytes);
    return trace;
}

enum class Outcome { Refused, Reported };

struct Verdict {
    Outcome outcome = Outcome::Refused;
    bool warned = false;           // both formats showed a warning
    bool warned_truncated = false; // and it said the file was truncated
};

TracedRun run_report(const TempDir& dir, const std::vector<std::string>& arguments) {
    RunOptions options;
    options.preload = false;
    return run_traced(dir, GPULEAK_REPORT, arguments, options);
}

// The exit status, after checking that the report ended by itself with one of the two it may use.
int status_of(const TracedRun& run) {
    INFO("stderr: " << run.err);
    const bool killed = WIFSIGNALED(run.wait_status);
    INFO("killed by signal " << (killed ? WTERMSIG(run.wait_status) : 0));
    REQUIRE_FALSE(killed);
    REQUIRE(WIFEXITED(run.wait_status));
    const int status = WEXITSTATUS(run.wait_status);
    REQUIRE((status == 0 || status == 2));
    return status;
}

// Refused input: no report, and one line `gpuleak-report: <path>: <problem>`.
void check_refusal(const TracedRun& run, const std::string& path) {
    INFO("stderr: " << run.err);
    CHECK(run.out.empty());
    const std::string prefix = "gpuleak-report: " + path + ": ";
    REQUIRE(run.err.size() > prefix.size() + 1); // a problem is named
    CHECK(run.err.compare(0, prefix.size(), prefix) == 0);
    CHECK(run.err.back() == '\n');
    CHECK(std::count(run.err.begin(), run.err.end(), '\n') == 1);
}

// Runs the report on `path` in both formats and checks the contract above.
Verdict check_report(const TempDir& dir, const std::string& path) {
    const TracedRun text = run_report(dir, {"--no-color", path});
    const TracedRun as_json = run_report(dir, {"--format", "json", path});
    const int text_status = status_of(text);
    const int json_status = status_of(as_json);
    INFO("text stderr: " << text.err << "json stderr: " << as_json.err);
    REQUIRE(text_status == json_status);
    Verdict verdict;
    if (text_status == 2) {
        check_refusal(text, path);
        check_refusal(as_json, path);
        return verdict;
    }
    verdict.outcome = Outcome::Reported;
    REQUIRE(!text.out.empty());
    json report;
    REQUIRE_NOTHROW(report = json::parse(as_json.out));
    REQUIRE(report["schema"] == "gpuleak-report/1");
    REQUIRE(report["processes"].size() == 1);
    const json& warnings = report["processes"][0]["warnings"];
    const bool json_warned = !warnings.empty() && as_json.err.find(": warning: ") != std::string::npos;
    const bool text_warned = text.out.find("warning: ") != std::string::npos;
    verdict.warned = json_warned && text_warned;
    verdict.warned_truncated = verdict.warned && text.out.find("warning: truncated") != std::string::npos &&
                               as_json.err.find(": warning: truncated") != std::string::npos;
    return verdict;
}

// Offsets in the header worth overwriting: every byte of the identity (magic, version, byte order,
// header size, flags, file size); the lowest and highest byte of every region, capacity and counter,
// since one makes a small change and the other a huge one; the strings, the end record and the
// accounting.
std::vector<size_t> header_offsets() {
    std::vector<size_t> offsets;
    for (size_t offset = 0; offset < offsetof(FileHeader, pid); ++offset)
        offsets.push_back(offset);
    for (size_t word = offsetof(FileHeader, modules); word < offsetof(FileHeader, accounting); word += 8) {
        offsets.push_back(word);
        offsets.push_back(word + 7);
    }
    offsets.insert(offsets.end(), {
                                      offsetof(FileHeader, pid),
                                      offsetof(FileHeader, start_monotonic_ns) + 7,
                                      offsetof(FileHeader, hostname),
                                      offsetof(FileHeader, parent_trace),
                                      offsetof(FileHeader, command_line_bytes),
                                      offsetof(FileHeader, command_line_bytes) + 3,
                                      offsetof(FileHeader, command_line),
                                      offsetof(FileHeader, command_line) + 12,
                                      offsetof(FileHeader, accounting),
                                      offsetof(FileHeader, accounting) + sizeof(FileHeader::accounting) - 1,
                                      offsetof(FileHeader, end_state),
                                      offsetof(FileHeader, end_commit),
                                      offsetof(FileHeader, end_monotonic_ns) + 7,
                                  });
    return offsets;
}

// 100 offsets in the regions: 70 spread over the bytes that hold something (records, slots, samples),
// 30 spread over all of them, mostly unused slots where 0xFF makes garbage the writer never wrote.
std::vector<size_t> region_offsets(const Bytes& trace) {
    std::vector<size_t> used;
    for (size_t offset = gpuleak::format::kHeaderBytes; offset < trace.size(); ++offset)
        if (trace[offset] != 0)
            used.push_back(offset);
    REQUIRE(used.size() >= 70);
    std::vector<size_t> offsets;
    for (size_t i = 0; i < 70; ++i)
        offsets.push_back(used[i * used.size() / 70]);
    const size_t body = trace.size() - gpuleak::format::kHeaderBytes;
    // `+ i % 8`: not always the same byte of a record.
    for (size_t i = 0; i < 30; ++i)
        offsets.push_back(std::min(trace.size() - 1, gpuleak::format::kHeaderBytes + i * body / 30 + i % 8));
    return offsets;
}

struct Tally {
    size_t refused = 0;
    size_t reported = 0;
};

// Each offset set to 0xFF, then to 0x00, one copy at a time.
Tally check_corruptions(const Bytes& trace, const std::vector<size_t>& offsets) {
    TempDir cases;
    const std::string path = cases.path() + "/corrupt.trace";
    Tally tally;
    for (size_t offset : offsets) {
        for (unsigned char value : {0xFF, 0x00}) {
            if (trace[offset] == value)
                continue;
            Bytes copy = trace;
            copy[offset] = value;
            write_bytes(path, copy);
            INFO("byte " << offset << " set to " << static_cast<int>(value));
            const Verdict verdict = check_report(cases, path);
            // Nothing can pass for a trace with a damaged magic, version, byte order or header size.
            if (offset < offsetof(FileHeader, flags))
                CHECK(verdict.outcome == Outcome::Refused);
            if (verdict.outcome == Outcome::Refused)
                ++tally.refused;
            else
                ++tally.reported;
        }
    }
    return tally;
}

} // namespace

TEST_CASE("a trace cut short anywhere is refused or reported with a warning") {
    TempDir dir;
    const Bytes trace = make_trace(dir);
    TempDir cases;
    const std::string path = cases.path() + "/truncated.trace";
    const size_t header = gpuleak::format::kHeaderBytes;
    std::vector<size_t> lengths;
    for (size_t k = 0; k < 16; ++k)
        lengths.push_back(trace.size() * k / 16);
    // Inside the magic, right after it, one byte short of the header, the header alone.
    lengths.insert(lengths.end(), {5, sizeof(gpuleak::format::kMagic), header - 1, header});
    for (size_t length : lengths) {
        write_bytes(path, trace, length);
        INFO("cut at " << length << " of " << trace.size() << " bytes");
        const Verdict verdict = check_report(cases, path);
        if (length < header) {
            CHECK(verdict.outcome == Outcome::Refused);
        } else {
            CHECK(verdict.outcome == Outcome::Reported);
            CHECK(verdict.warned_truncated);
        }
    }
}

TEST_CASE("a trace with bytes after its end is reported") {
    TempDir dir;
    Bytes trace = make_trace(dir);
    trace.resize(trace.size() + 4096, 0xAB);
    TempDir cases;
    const std::string path = cases.path() + "/long.trace";
    write_bytes(path, trace);
    CHECK(check_report(cases, path).outcome == Outcome::Reported);
}

TEST_CASE("single corrupt bytes in the header never crash the report") {
    TempDir dir;
    const Bytes trace = make_trace(dir);
    const Tally tally = check_corruptions(trace, header_offsets());
    // Both paths were taken: some damage to the header is fatal, some is not.
    CHECK(tally.refused > 0);
    CHECK(tally.reported > 0);
}

TEST_CASE("single corrupt bytes in the regions never crash the report") {
    TempDir dir;
    const Bytes trace = make_trace(dir);
    const Tally tally = check_corruptions(trace, region_offsets(trace));
    // A damaged record costs that record (with a warning), never the whole trace.
    CHECK(tally.refused == 0);
    CHECK(tally.reported > 0);
}

TEST_CASE("random bytes are refused and a random body after a valid header does not crash") {
    TempDir dir;
    const Bytes trace = make_trace(dir);
    TempDir cases;
    const std::string path = cases.path() + "/random.trace";
    std::mt19937_64 random(20240611); // fixed: a failure must reproduce
    auto random_bytes = [&](size_t count) {
        Bytes bytes(count);
        for (unsigned char& byte : bytes)
            byte = static_cast<unsigned char>(random());
        return bytes;
    };

    write_bytes(path, random_bytes(64 << 10));
    CHECK(check_report(cases, path).outcome == Outcome::Refused);

    // A random body behind the real header, and the magic alone followed by random bytes.
    Bytes body = random_bytes(trace.size());
    std::copy_n(trace.begin(), gpuleak::format::kHeaderBytes, body.begin());
    write_bytes(path, body);
    check_report(cases, path);
    Bytes magic_only = random_bytes(trace.size());
    std::copy_n(trace.begin(), sizeof(gpuleak::format::kMagic), magic_only.begin());
    write_bytes(path, magic_only);
    CHECK(check_report(cases, path).outcome == Outcome::Refused);
}

TEST_CASE("an empty file a directory without traces and a missing file are refused") {
    TempDir cases;
    const std::string empty = cases.path() + "/empty.trace";
    write_bytes(empty, {});
    CHECK(check_report(cases, empty).outcome == Outcome::Refused);

    const std::string directory = cases.path() + "/no-traces";
    std::filesystem::create_directory(directory);
    CHECK(check_report(cases, directory).outcome == Outcome::Refused);
    write_bytes(directory + "/notes.txt", Bytes{'h', 'i', '\n'});
    CHECK(check_report(cases, directory).outcome == Outcome::Refused);

    CHECK(check_report(cases, cases.path() + "/missing.trace").outcome == Outcome::Refused);
}

TEST_CASE("a command line that is not UTF-8 is reported in valid JSON") {
    TempDir dir;
    RunOptions options;
    options.environment = {"GPULEAK_QUIET=1"};
    TracedRun run = run_traced(dir, program_path("scenario_leak"), {"3", "caf\xe9"}, options); // Latin-1
    REQUIRE(run.exited_with(0));
    REQUIRE(run.traces().size() == 1);
    TempDir out;
    const TracedRun report = run_report(out, {"--format", "json", run.traces()[0]});
    INFO(report.err);
    REQUIRE(report.exited_with(0));
    const json parsed = json::parse(report.out);
    CHECK(parsed["processes"][0]["command"][2] == "caf\xef\xbf\xbd"); // U+FFFD for the byte that is not UTF-8
}

// The statuses are CLI11's, as docs/reference/command-line.md lists them for gpuleak-report; never 2,
// which means a trace could not be read.
TEST_CASE("usage errors exit with the documented status and a message and no report") {
    TempDir dir;
    const Bytes trace = make_trace(dir);
    const std::string path = dir.path() + "/valid.trace";
    write_bytes(path, trace);
    struct Usage {
        std::vector<std::string> arguments;
        int status;
    };
    const std::vector<Usage> usages = {
        {{"--no-such-flag", path}, 109},
        {{"--format", "bad", path}, 105},
        {{"--top", "0", path}, 105},
        {{}, 106}, // no trace named
    };
    for (const Usage& usage : usages) {
        const TracedRun run = run_report(dir, usage.arguments);
        INFO("arguments: " << usage.arguments.size()
                           << (usage.arguments.empty() ? "" : " first " + usage.arguments[0]));
        INFO("stderr: " << run.err);
        REQUIRE(WIFEXITED(run.wait_status));
        CHECK(WEXITSTATUS(run.wait_status) == usage.status);
        CHECK(run.out.empty());
        CHECK(!run.err.empty());
    }
}

TEST_CASE("the formats' table names every format with its media type, and needs no trace") {
    TempDir dir;
    const TracedRun listed = run_report(dir, {"--list-formats"});
    REQUIRE(WIFEXITED(listed.wait_status));
    REQUIRE(WEXITSTATUS(listed.wait_status) == 0);
    const json table = json::parse(listed.out);
    CHECK(table["schema"] == "gpuleak-formats/1");
    std::map<std::string, json> formats;
    for (const json& format : table["formats"])
        formats[format["name"]] = format;
    REQUIRE(formats.size() == 7);
    CHECK(formats["text"]["media_type"] == "text/plain");
    CHECK(formats["json"]["media_type"] == "application/json");
    CHECK(formats["html"]["media_type"] == "text/html");
    CHECK(formats["html"]["run_file"] == "report.html");
    CHECK(formats["job"]["media_type"] == "application/json");
    CHECK(formats["job"]["run_file"] == "job.json");
    CHECK(formats["pprof"]["binary"] == true);
    CHECK(formats["torch-snapshot"]["one_process"] == true);
    CHECK(formats["torch-snapshot"]["changes"] == false);
    CHECK(formats["watch"]["media_type"] == "text/plain");
    CHECK(formats["watch"]["run_file"] == "");
    // Each is one --format takes.
    const Bytes trace = make_trace(dir);
    const std::string path = dir.path() + "/valid.trace";
    write_bytes(path, trace);
    for (const auto& [name, format] : formats) {
        INFO("format " << name);
        const std::string out = dir.path() + "/report." + name;
        const TracedRun run = run_report(dir, {"--format", name, "-o", out, path});
        REQUIRE(WIFEXITED(run.wait_status));
        if (name == "job") {
            // A process that is no rank makes no job: said in one line, and nothing written.
            CHECK(WEXITSTATUS(run.wait_status) == 2);
            CHECK(run.err.find("no process is a rank") != std::string::npos);
            CHECK_FALSE(std::filesystem::exists(out));
            continue;
        }
        CHECK(WEXITSTATUS(run.wait_status) == 0);
        CHECK(std::filesystem::file_size(out) > 0);
    }
}

// What another user may plant at the -o path in a shared directory: the report goes nowhere but a
// regular file, made readable by its owner only, and never waits on a FIFO.
TEST_CASE("a report written with -o goes only into a regular file, made 0600, never through a link or into a "
          "FIFO") {
    TempDir dir;
    const std::string trace = dir.path() + "/valid.trace";
    write_bytes(trace, make_trace(dir));

    const std::string fresh = dir.path() + "/report.txt";
    TracedRun run = run_report(dir, {"--no-color", "-o", fresh, trace});
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    CHECK((std::filesystem::status(fresh).permissions() & std::filesystem::perms::all) ==
          (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
    CHECK(!read_bytes(fresh).empty());

    const std::string target = dir.path() + "/victim";
    write_bytes(target, Bytes{'k', 'e', 'p', 't'});
    const std::string link = dir.path() + "/link.txt";
    std::filesystem::create_symlink(target, link);
    run = run_report(dir, {"--no-color", "-o", link, trace});
    CHECK(status_of(run) == 2);
    CHECK(run.err == "gpuleak-report: " + link + ": cannot write the report: a symbolic link\n");
    CHECK(read_bytes(target) == Bytes{'k', 'e', 'p', 't'});

    // No reader: the open fails at once rather than hanging the report.
    const std::string fifo = dir.path() + "/fifo.txt";
    REQUIRE(::mkfifo(fifo.c_str(), 0666) == 0);
    run = run_report(dir, {"--no-color", "-o", fifo, trace});
    CHECK(status_of(run) == 2);
    CHECK(run.err.find(fifo + ": cannot write the report: ") != std::string::npos);
    // A reader waiting: still not written into.
    const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    REQUIRE(reader >= 0);
    run = run_report(dir, {"--no-color", "-o", fifo, trace});
    CHECK(status_of(run) == 2);
    CHECK(run.err == "gpuleak-report: " + fifo + ": cannot write the report: not a regular file\n");
    char byte = 0;
    CHECK(::read(reader, &byte, 1) <= 0);
    ::close(reader);
}

// In a shared directory anyone may drop a trace: another user's is left out, and said so, unless asked.
TEST_CASE("another user's trace in a directory is left out of the report unless --any-owner") {
    TempDir dir;
    const Bytes trace = make_trace(dir);
    const std::string traces = dir.path() + "/traces";
    std::filesystem::create_directory(traces);
    write_bytes(traces + "/mine.trace", trace);
    const std::string foreign = traces + "/planted.trace";
    write_bytes(foreign, trace);
    if (::chown(foreign.c_str(), 65534, 65534) != 0) {
        WARN("chown needs root here: not tested");
        return;
    }
    TracedRun run = run_report(dir, {"--format", "json", traces});
    REQUIRE(status_of(run) == 0);
    CHECK(json::parse(run.out)["processes"].size() == 1);
    CHECK(run.err == "gpuleak-report: warning: left out 1 trace of another user (--any-owner reads them): " +
                         foreign + "\n");
    run = run_report(dir, {"--format", "json", "--any-owner", traces});
    REQUIRE(status_of(run) == 0);
    CHECK(json::parse(run.out)["processes"].size() == 2);
    CHECK(run.err.empty());
    // Named itself, it is read: the user asked for it, also with its directory.
    run = run_report(dir, {"--format", "json", foreign});
    REQUIRE(status_of(run) == 0);
    CHECK(json::parse(run.out)["processes"].size() == 1);
    run = run_report(dir, {"--format", "json", traces, foreign});
    REQUIRE(status_of(run) == 0);
    CHECK(json::parse(run.out)["processes"].size() == 2);
    CHECK(run.err.empty());
    // A link among the traces is not followed: it could be swapped between the check and the read.
    std::filesystem::create_symlink(traces + "/mine.trace", traces + "/link.trace");
    run = run_report(dir, {"--format", "json", traces});
    REQUIRE(status_of(run) == 0);
    CHECK(json::parse(run.out)["processes"].size() == 1);
    std::filesystem::remove(traces + "/link.trace");
    // A directory of other users' traces only is refused, with the way to read them.
    std::filesystem::remove(traces + "/mine.trace");
    run = run_report(dir, {"--format", "json", traces});
    CHECK(status_of(run) == 2);
    check_refusal(run, traces);
    CHECK(run.err.find("--any-owner") != std::string::npos);
}

namespace {

// Whether process `pid` maps `path`.
bool maps_file(pid_t pid, const std::string& path) {
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    for (std::string line; std::getline(maps, line);)
        if (line.ends_with(" " + path))
            return true;
    return false;
}

} // namespace

TEST_CASE("a trace cut shorter while the report reads it is refused with one line, never a crash") {
    TempDir dir;
    RunOptions options;
    options.environment = {"GPULEAK_MAX_MB=64", "GPULEAK_STACK_DEPTH=1", "GPULEAK_QUIET=1"};
    // Hundreds of thousands of live blocks and events: reading them takes the report a while.
    TracedRun run = run_traced(dir, program_path("scenario_many_live"), {"300000"}, options);
    INFO(run.err);
    REQUIRE(run.exited_with(0));
    REQUIRE(run.traces().size() == 1);
    const std::string original = run.traces()[0];
    const std::string path = dir.path() + "/cut.trace";
    // The report may be done with the file before it is cut: then it is tried again, on a new copy.
    int refused = 0;
    for (int attempt = 0; attempt < 5 && refused == 0; ++attempt) {
        std::filesystem::copy_file(original, path, std::filesystem::copy_options::overwrite_existing);
        const std::string err_path = dir.path() + "/report.err";
        const pid_t report = ::fork();
        REQUIRE(report >= 0);
        if (report == 0) {
            const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
            const int null = ::open("/dev/null", O_WRONLY);
            ::dup2(err, STDERR_FILENO);
            ::dup2(null, STDOUT_FILENO);
            ::execl(GPULEAK_REPORT, GPULEAK_REPORT, "--no-symbol-cache", path.c_str(), nullptr);
            ::_exit(127);
        }
        bool mapped = false;
        int status = 0;
        while (!mapped && ::waitpid(report, &status, WNOHANG) == 0)
            mapped = maps_file(report, path);
        // Cut down to its header, as another program's truncate would.
        if (mapped)
            REQUIRE(::truncate(path.c_str(), gpuleak::format::kHeaderBytes) == 0);
        if (mapped)
            REQUIRE(::waitpid(report, &status, 0) == report);
        const std::string err = [&] {
            std::ifstream file(err_path);
            return std::string(std::istreambuf_iterator<char>(file), {});
        }();
        INFO("stderr: " << err);
        // Before, reading past the new end killed the report with SIGBUS.
        REQUIRE_FALSE(WIFSIGNALED(status));
        REQUIRE(WIFEXITED(status));
        if (WEXITSTATUS(status) == 0)
            continue;
        CHECK(WEXITSTATUS(status) == 2);
        CHECK(err ==
              "gpuleak-report: " + path +
                  ": the file was cut shorter while it was read (by another program?): what it held past "
                  "its new end is lost; report it again once it is whole\n");
        ++refused;
    }
    CHECK(refused == 1);
}
