#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iterator>
#include <link.h>
#include <stop_token>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <time.h>
#include <unistd.h>
#include <vector>

#include "recording/loaded_object.h"
#include "symbolizer_fixture.h"
#include "symbols/symbol_cache.h"
#include "symbols/symbolizer.h"
#include "temp_dir.h"

using Catch::Matchers::EndsWith;
using gpuleak::analyzer::Module;
using gpuleak::analyzer::ModuleRegistry;
using gpuleak::analyzer::SourceFrame;
using gpuleak::analyzer::Symbolizer;

namespace {

// The build id from an object's PT_NOTE segments in memory, read by the recorder's own code.
std::vector<uint8_t> build_id_of(const dl_phdr_info* info) {
    uint8_t bytes[32];
    const uint32_t count = gpuleak::find_build_id(info, bytes, sizeof bytes);
    return {bytes, bytes + count};
}

// The module map of this process, made the way the recorder makes it.
std::vector<Module> loaded_modules() {
    std::vector<Module> modules;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            Module module;
            module.load_address = info->dlpi_addr;
            module.low = UINT64_MAX;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& header = info->dlpi_phdr[i];
                if (header.p_type != PT_LOAD)
                    continue;
                module.low = std::min<uint64_t>(module.low, info->dlpi_addr + header.p_vaddr);
                module.high =
                    std::max<uint64_t>(module.high, info->dlpi_addr + header.p_vaddr + header.p_memsz);
            }
            module.path = info->dlpi_name != nullptr && info->dlpi_name[0] != '\0'
                              ? std::string(info->dlpi_name)
                              : std::filesystem::read_symlink("/proc/self/exe").string();
            module.build_id = build_id_of(info);
            static_cast<std::vector<Module>*>(data)->push_back(module);
            return 0;
        },
        &modules);
    return modules;
}

Module& module_containing(std::vector<Module>& modules, uint64_t address) {
    for (Module& module : modules) {
        if (module.low <= address && address < module.high)
            return module;
    }
    FAIL("no module contains " << address);
    return modules.front();
}

// The fixture library, loaded once for all tests and never unloaded.
void* fixture() {
    static void* handle = [] {
        // A debuginfod server would be asked about every file without local debug info: not in tests.
        unsetenv("DEBUGINFOD_URLS");
        return dlopen(GPULEAK_SYMBOLIZER_FIXTURE, RTLD_NOW | RTLD_LOCAL);
    }();
    REQUIRE(handle != nullptr);
    return handle;
}

FixtureSite call_fixture(const char* entry_point, int seed = 1) {
    auto* entry = reinterpret_cast<FixtureEntry>(dlsym(fixture(), entry_point));
    REQUIRE(entry != nullptr);
    return entry(seed);
}

Module& fixture_module(std::vector<Module>& modules) {
    Module& module = module_containing(modules, call_fixture(kFixturePlain).return_address);
    REQUIRE(module.path == GPULEAK_SYMBOLIZER_FIXTURE);
    REQUIRE(module.load_address != 0);
    REQUIRE_FALSE(module.build_id.empty());
    return module;
}

// Puts the fixture's separate debug file where a debuginfo path of `root` finds it by build id.
void install_debug_file(const std::string& root, const Module& fixture_module) {
    const std::vector<uint8_t>& id = fixture_module.build_id;
    std::string rest;
    for (size_t i = 1; i < id.size(); ++i)
        rest += fmt::format("{:02x}", id[i]);
    const std::string directory = fmt::format("{}/.build-id/{:02x}", root, id[0]);
    std::filesystem::create_directories(directory);
    std::filesystem::copy_file(GPULEAK_SYMBOLIZER_FIXTURE_DEBUG, directory + "/" + rest + ".debug");
}

void require_unsymbolized(const std::vector<SourceFrame>& frames, const std::string& module,
                          uint64_t offset) {
    REQUIRE(frames.size() == 1);
    CHECK_FALSE(frames[0].symbolized);
    CHECK(frames[0].function.empty());
    CHECK(frames[0].file.empty());
    CHECK(frames[0].line == 0);
    CHECK(frames[0].module == module);
    CHECK(frames[0].module_offset == offset);
}

} // namespace

TEST_CASE("a call in a namespaced C++ function is symbolized to its demangled name file and line") {
    const FixtureSite site = call_fixture(kFixtureWidget);
    std::vector<Module> modules = loaded_modules();
    const Module& module = fixture_module(modules);
    Symbolizer symbolizer(modules);

    const std::vector<SourceFrame>& frames = symbolizer.symbolize(site.return_address);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].symbolized);
    CHECK(frames[0].function == "fixture::Widget::make(int)");
    CHECK_THAT(frames[0].file, EndsWith("/symbolizer_fixture.cpp"));
    CHECK(frames[0].line == static_cast<uint32_t>(site.line));
    CHECK_FALSE(frames[0].inlined);
    CHECK_FALSE(frames[0].stale);
    CHECK(frames[0].module == module.path);
    CHECK(frames[0].module_offset == site.return_address - module.load_address);
    CHECK(symbolizer.warnings().empty());
    // Stacks share frames: the second time the same answer comes from the cache.
    CHECK(&symbolizer.symbolize(site.return_address) == &frames);
}

TEST_CASE("a call in a C function is symbolized to its name file and line") {
    const FixtureSite site = call_fixture(kFixturePlain);
    Symbolizer symbolizer(loaded_modules());

    const std::vector<SourceFrame>& frames = symbolizer.symbolize(site.return_address);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].function == "fixture_plain");
    CHECK_THAT(frames[0].file, EndsWith("/symbolizer_fixture.cpp"));
    CHECK(frames[0].line == static_cast<uint32_t>(site.line));
}

TEST_CASE("a call in an inlined function gives the inlined callee and then its caller") {
    const FixtureSite site = call_fixture(kFixtureInlined);
    Symbolizer symbolizer(loaded_modules());

    const std::vector<SourceFrame>& frames = symbolizer.symbolize(site.return_address);
    REQUIRE(frames.size() == 2);
    CHECK(frames[0].function == "fixture::inlined_leaf(int)");
    CHECK(frames[0].inlined);
    CHECK_THAT(frames[0].file, EndsWith("/symbolizer_fixture.cpp"));
    CHECK(frames[0].line == static_cast<uint32_t>(site.line));
    CHECK(frames[1].function == "fixture::with_inlined_call(int)");
    CHECK_FALSE(frames[1].inlined);
    CHECK_THAT(frames[1].file, EndsWith("/symbolizer_fixture.cpp"));
    CHECK(frames[1].line == static_cast<uint32_t>(site.caller_line));
    CHECK(frames[0].module_offset == frames[1].module_offset);
}

TEST_CASE("a call in the main program is symbolized to its file and line") {
    auto* return_address_of = reinterpret_cast<FixtureReturnAddress>(dlsym(fixture(), kFixtureReturnAddress));
    REQUIRE(return_address_of != nullptr);
    const int line = __LINE__ + 1;
    const uintptr_t return_address = return_address_of(7);
    Symbolizer symbolizer(loaded_modules());

    const std::vector<SourceFrame>& frames = symbolizer.symbolize(return_address);
    REQUIRE_FALSE(frames.empty());
    CHECK(frames.back().symbolized);
    CHECK_THAT(frames.front().file, EndsWith("/test_symbolizer.cpp"));
    CHECK(frames.front().line == static_cast<uint32_t>(line));
    CHECK(frames.back().module == std::filesystem::read_symlink("/proc/self/exe").string());
}

TEST_CASE("a module whose file has another build id is left unsymbolized and marked stale") {
    const FixtureSite site = call_fixture(kFixtureWidget);
    std::vector<Module> modules = loaded_modules();
    Module& module = fixture_module(modules);
    module.build_id[0] ^= 0xff;
    TempDir no_debug_files;
    Symbolizer symbolizer(modules, no_debug_files.path());

    const std::vector<SourceFrame>& frames = symbolizer.symbolize(site.return_address);
    require_unsymbolized(frames, module.path, site.return_address - module.load_address);
    CHECK(frames[0].stale);
    REQUIRE(symbolizer.warnings().size() == 1);
    CHECK_THAT(symbolizer.warnings()[0], Catch::Matchers::Contains("build id differs"));
}

TEST_CASE("an address outside every module is left unsymbolized") {
    Symbolizer symbolizer(loaded_modules());
    const std::vector<SourceFrame>& frames = symbolizer.symbolize(0x10);
    require_unsymbolized(frames, "", 0x10);
    CHECK_FALSE(frames[0].stale);
}

TEST_CASE("a module path that does not exist is left unsymbolized") {
    const FixtureSite site = call_fixture(kFixtureWidget);
    std::vector<Module> modules = loaded_modules();
    Module& module = fixture_module(modules);
    module.path = "/nonexistent/libgone.so";
    TempDir no_debug_files;
    Symbolizer symbolizer(modules, no_debug_files.path());

    const std::vector<SourceFrame>& frames = symbolizer.symbolize(site.return_address);
    require_unsymbolized(frames, "/nonexistent/libgone.so", site.return_address - module.load_address);
    CHECK_FALSE(frames[0].stale);
    REQUIRE(symbolizer.warnings().size() == 1);
    CHECK_THAT(symbolizer.warnings()[0], Catch::Matchers::StartsWith("/nonexistent/libgone.so: "));
}

TEST_CASE("modules that are not ELF files or not files at all are left unsymbolized") {
    const FixtureSite site = call_fixture(kFixtureWidget);
    TempDir dir;
    const std::string garbage = dir.path() + "/libgarbage.so";
    std::ofstream(garbage) << "not an ELF file\n";
    // Opening a FIFO for reading waits for a writer, unless the symbolizer takes care not to.
    const std::string fifo = dir.path() + "/libfifo.so";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    std::vector<Module> modules = loaded_modules();
    Module& module = fixture_module(modules);
    module.build_id.clear();
    const uint64_t offset = site.return_address - module.load_address;

    for (const std::string& path :
         {garbage, fifo, dir.path(), std::string("/dev/zero"), std::string("linux-vdso.so.1")}) {
        module.path = path;
        Symbolizer symbolizer(modules, dir.path());
        require_unsymbolized(symbolizer.symbolize(site.return_address), path, offset);
        CHECK(symbolizer.warnings().size() == 1);
    }
}

TEST_CASE("a stripped library is symbolized from the separate debug file found by its build id") {
    const FixtureSite site = call_fixture(kFixtureInlined);
    std::vector<Module> modules = loaded_modules();
    Module& module = fixture_module(modules);
    module.path = GPULEAK_SYMBOLIZER_FIXTURE_STRIPPED;
    TempDir debug_root;
    install_debug_file(debug_root.path(), module);
    Symbolizer symbolizer(modules, debug_root.path());

    const std::vector<SourceFrame>& frames = symbolizer.symbolize(site.return_address);
    REQUIRE(frames.size() == 2);
    CHECK(frames[0].function == "fixture::inlined_leaf(int)");
    CHECK(frames[0].line == static_cast<uint32_t>(site.line));
    CHECK(frames[1].function == "fixture::with_inlined_call(int)");
    CHECK(frames[1].line == static_cast<uint32_t>(site.caller_line));
    CHECK(frames[1].module == GPULEAK_SYMBOLIZER_FIXTURE_STRIPPED);
}

TEST_CASE("a stripped library without debug info is named from its dynamic symbols") {
    const FixtureSite site = call_fixture(kFixtureWidget);
    std::vector<Module> modules = loaded_modules();
    Module& module = fixture_module(modules);
    module.path = GPULEAK_SYMBOLIZER_FIXTURE_STRIPPED;
    TempDir no_debug_files;
    Symbolizer symbolizer(modules, no_debug_files.path());

    const std::vector<SourceFrame>& frames = symbolizer.symbolize(site.return_address);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].symbolized);
    CHECK(frames[0].function == "fixture::Widget::make(int)");
    CHECK(frames[0].file.empty());
    CHECK(frames[0].line == 0);
}

TEST_CASE("a library that is gone is symbolized from a debug file with its build id") {
    const FixtureSite site = call_fixture(kFixtureWidget);
    std::vector<Module> modules = loaded_modules();
    Module& module = fixture_module(modules);
    module.path = "/nonexistent/libgone.so";
    TempDir debug_root;
    install_debug_file(debug_root.path(), module);
    Symbolizer symbolizer(modules, debug_root.path());

    const std::vector<SourceFrame>& frames = symbolizer.symbolize(site.return_address);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].function == "fixture::Widget::make(int)");
    CHECK(frames[0].line == static_cast<uint32_t>(site.line));
    CHECK(frames[0].module == "/nonexistent/libgone.so");
    CHECK(symbolizer.warnings().empty());
}

TEST_CASE("reading ahead on another thread changes neither the frames nor the warnings") {
    auto* return_address_of = reinterpret_cast<FixtureReturnAddress>(dlsym(fixture(), kFixtureReturnAddress));
    REQUIRE(return_address_of != nullptr);
    const uintptr_t in_program = return_address_of(3);
    const FixtureSite site = call_fixture(kFixtureInlined);
    std::vector<Module> modules = loaded_modules();
    fixture_module(modules);
    // The program's module cannot be opened: symbolizing in it warns, reading ahead must not.
    Module& program = module_containing(modules, in_program);
    program.path = "/nonexistent/program";
    TempDir no_debug_files;
    Symbolizer as_needed(modules, no_debug_files.path());
    Symbolizer read_ahead(modules, no_debug_files.path());

    std::jthread([&](std::stop_token stop) {
        read_ahead.read_ahead({in_program, site.return_address, site.return_address, 0x10}, std::move(stop));
    }).join();
    CHECK(read_ahead.warnings().empty());
    for (uint64_t address : {uint64_t{site.return_address}, uint64_t{in_program}, uint64_t{0x10}}) {
        const std::vector<SourceFrame>& expected = as_needed.symbolize(address);
        const std::vector<SourceFrame>& frames = read_ahead.symbolize(address);
        REQUIRE(frames.size() == expected.size());
        for (size_t i = 0; i < frames.size(); ++i) {
            CHECK(frames[i].function == expected[i].function);
            CHECK(frames[i].file == expected[i].file);
            CHECK(frames[i].line == expected[i].line);
            CHECK(frames[i].module == expected[i].module);
            CHECK(frames[i].module_offset == expected[i].module_offset);
            CHECK(frames[i].inlined == expected[i].inlined);
            CHECK(frames[i].symbolized == expected[i].symbolized);
            CHECK(frames[i].stale == expected[i].stale);
        }
    }
    CHECK(read_ahead.symbolize(site.return_address).size() == 2);
    REQUIRE(read_ahead.warnings().size() == 1);
    CHECK(read_ahead.warnings() == as_needed.warnings());
    CHECK_THAT(read_ahead.warnings()[0], Catch::Matchers::StartsWith("/nonexistent/program: "));
}

TEST_CASE("reading ahead stops when asked and leaves the rest to symbolize") {
    const FixtureSite site = call_fixture(kFixtureWidget);
    Symbolizer symbolizer(loaded_modules());
    std::stop_source stop;
    stop.request_stop();
    symbolizer.read_ahead({site.return_address}, stop.get_token());

    const std::vector<SourceFrame>& frames = symbolizer.symbolize(site.return_address);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].function == "fixture::Widget::make(int)");
    CHECK(frames[0].line == static_cast<uint32_t>(site.line));
}

namespace {

using gpuleak::analyzer::ModuleFrameCache;

// A copy of the stripped fixture in `dir`, so that a test may change its file without touching the
// build's, and a debug root that finds its separate debug file by build id.
struct CachedFixture {
    TempDir dir;
    TempDir debug_root;
    TempDir cache;
    // Called first: it loads the fixture, which the module map must hold.
    FixtureSite site = call_fixture(kFixtureWidget);
    std::vector<Module> modules = loaded_modules();
    Module* module = nullptr;
    uint64_t offset = 0;

    CachedFixture() {
        module = &fixture_module(modules);
        module->path = dir.path() + "/libfixture.so";
        std::filesystem::copy_file(GPULEAK_SYMBOLIZER_FIXTURE_STRIPPED, module->path);
        install_debug_file(debug_root.path(), *module);
        offset = site.return_address - module->load_address;
    }

    // The frames a symbolizer with the cache gives, written to the cache when it goes.
    std::vector<SourceFrame> symbolize(const std::string& debuginfo_path) const {
        Symbolizer symbolizer(modules, debuginfo_path, cache.path());
        return symbolizer.symbolize(site.return_address);
    }
    // What the cache holds for the module's return address, read as a symbolizer with
    // `debuginfo_path` would read it.
    [[nodiscard]] const ModuleFrameCache::Frames* kept(const ModuleFrameCache& kept_frames) const {
        return kept_frames.find(offset);
    }
    [[nodiscard]] ModuleFrameCache read_cache(const std::string& debuginfo_path) const {
        return {cache.path(), module->build_id, debuginfo_path, module->path};
    }
    [[nodiscard]] std::string cache_file() const {
        std::string name;
        for (uint8_t byte : module->build_id)
            name += fmt::format("{:02x}", byte);
        return cache.path() + "/" + name + ".frames";
    }
};

void set_modified(const std::string& path, time_t seconds) {
    const timespec times[2] = {{seconds, 0}, {seconds, 0}};
    REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

} // namespace

TEST_CASE("frames read from debug info are kept in the cache directory for the next symbolizer") {
    CachedFixture fixture;
    const std::vector<SourceFrame> frames = fixture.symbolize(fixture.debug_root.path());
    REQUIRE(frames.size() == 1);
    REQUIRE(frames[0].function == "fixture::Widget::make(int)");

    const ModuleFrameCache cache = fixture.read_cache(fixture.debug_root.path());
    const ModuleFrameCache::Frames* kept = fixture.kept(cache);
    REQUIRE(kept != nullptr);
    REQUIRE(kept->size() == 1);
    CHECK((*kept)[0].function == frames[0].function);
    CHECK((*kept)[0].file == frames[0].file);
    CHECK((*kept)[0].line == frames[0].line);
    CHECK((*kept)[0].symbolized);
    CHECK_FALSE((*kept)[0].inlined);
    // The next symbolizer gives the same frames, with the module filled in as from debug info.
    const std::vector<SourceFrame> again = fixture.symbolize(fixture.debug_root.path());
    REQUIRE(again.size() == 1);
    CHECK(again[0].function == frames[0].function);
    CHECK(again[0].line == frames[0].line);
    CHECK(again[0].module == fixture.module->path);
    CHECK(again[0].module_offset == frames[0].module_offset);
}

TEST_CASE("a symbolizer takes kept frames instead of reading the debug info while its files are unchanged") {
    CachedFixture fixture;
    set_modified(fixture.module->path, 1'000'000'000);
    {
        ModuleFrameCache cache = fixture.read_cache(fixture.debug_root.path());
        SourceFrame kept;
        kept.function = "kept::frame()";
        kept.symbolized = true;
        cache.add(fixture.offset, {kept});
        cache.save({fixture.debug_root.path(), fixture.module->path, {fixture.module->path}});
    }
    CHECK(fixture.symbolize(fixture.debug_root.path())[0].function == "kept::frame()");

    SECTION("not once the module's file has changed") {
        set_modified(fixture.module->path, 1'000'000'001);
        CHECK(fixture.symbolize(fixture.debug_root.path())[0].function == "fixture::Widget::make(int)");
    }
    SECTION("not with another debug info search path") {
        TempDir other_root;
        install_debug_file(other_root.path(), *fixture.module);
        CHECK(fixture.symbolize(other_root.path())[0].function == "fixture::Widget::make(int)");
    }
    SECTION("not without a cache directory") {
        Symbolizer symbolizer(fixture.modules, fixture.debug_root.path());
        CHECK(symbolizer.symbolize(fixture.site.return_address)[0].function == "fixture::Widget::make(int)");
    }
}

TEST_CASE("kept frames are dropped when their debug file changes or one is installed where it is looked for "
          "first") {
    CachedFixture fixture;
    TempDir first_root;
    const std::string search_path = first_root.path() + ":" + fixture.debug_root.path();
    fixture.symbolize(search_path);
    REQUIRE(fixture.kept(fixture.read_cache(search_path)) != nullptr);

    SECTION("the debug file changed") {
        const std::vector<uint8_t>& id = fixture.module->build_id;
        std::string rest;
        for (size_t i = 1; i < id.size(); ++i)
            rest += fmt::format("{:02x}", id[i]);
        set_modified(fmt::format("{}/.build-id/{:02x}/{}.debug", fixture.debug_root.path(), id[0], rest), 1);
        CHECK(fixture.kept(fixture.read_cache(search_path)) == nullptr);
    }
    SECTION("a debug file installed in a directory searched before it") {
        install_debug_file(first_root.path(), *fixture.module);
        CHECK(fixture.kept(fixture.read_cache(search_path)) == nullptr);
    }
    SECTION("but not by a symbolizer of another search path") {
        CHECK(fixture.kept(fixture.read_cache(fixture.debug_root.path())) == nullptr);
    }
}

TEST_CASE("a damaged cache file is ignored and rewritten") {
    CachedFixture fixture;
    const std::vector<SourceFrame> frames = fixture.symbolize(fixture.debug_root.path());
    std::ifstream in(fixture.cache_file(), std::ios::binary);
    const std::string whole{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    REQUIRE(whole.size() > 32);

    for (size_t size = 0; size < whole.size(); ++size) {
        std::ofstream(fixture.cache_file(), std::ios::binary | std::ios::trunc) << whole.substr(0, size);
        INFO("cut at " << size);
        REQUIRE(fixture.kept(fixture.read_cache(fixture.debug_root.path())) == nullptr);
    }
    std::ofstream(fixture.cache_file(), std::ios::binary | std::ios::trunc) << whole << "trailing bytes";
    CHECK(fixture.kept(fixture.read_cache(fixture.debug_root.path())) == nullptr);

    const std::vector<SourceFrame> again = fixture.symbolize(fixture.debug_root.path());
    REQUIRE(again.size() == frames.size());
    CHECK(again[0].function == frames[0].function);
    CHECK(again[0].line == frames[0].line);
    CHECK(fixture.kept(fixture.read_cache(fixture.debug_root.path())) != nullptr);
}

TEST_CASE("a cache directory that cannot be made leaves the frames as they are") {
    CachedFixture fixture;
    const std::string blocked = fixture.cache.path() + "/a-file";
    std::ofstream(blocked) << "in the way\n";
    Symbolizer symbolizer(fixture.modules, fixture.debug_root.path(), blocked + "/symbols");
    CHECK(symbolizer.symbolize(fixture.site.return_address)[0].function == "fixture::Widget::make(int)");
}

TEST_CASE("modules without DWARF or without a recorded build id are not kept") {
    CachedFixture fixture;
    TempDir no_debug_files;
    // Named from its dynamic symbols: cheap to do again, and a debug file may be installed later.
    CHECK(fixture.symbolize(no_debug_files.path())[0].function == "fixture::Widget::make(int)");
    CHECK_FALSE(std::filesystem::exists(fixture.cache_file()));

    fixture.module->build_id.clear();
    fixture.module->path = GPULEAK_SYMBOLIZER_FIXTURE;
    CHECK(fixture.symbolize(no_debug_files.path())[0].function == "fixture::Widget::make(int)");
    CHECK(std::filesystem::is_empty(fixture.cache.path()));
}

TEST_CASE("the cache directory keeps the modules written last") {
    CachedFixture fixture;
    for (int i = 0; i < 600; ++i) {
        const std::string old = fmt::format("{}/{:040x}.frames", fixture.cache.path(), i);
        std::ofstream(old) << "old";
        set_modified(old, 1'000'000 + i);
    }
    const std::string unrelated = fixture.cache.path() + "/notes.txt";
    std::ofstream(unrelated) << "not ours";
    fixture.symbolize(fixture.debug_root.path());

    size_t modules = 0;
    for (const auto& entry : std::filesystem::directory_iterator(fixture.cache.path()))
        modules += entry.path().extension() == ".frames" ? 1 : 0;
    CHECK(modules == 512);
    CHECK(std::filesystem::exists(fixture.cache_file()));
    CHECK(std::filesystem::exists(fmt::format("{}/{:040x}.frames", fixture.cache.path(), 599)));
    CHECK_FALSE(std::filesystem::exists(fmt::format("{}/{:040x}.frames", fixture.cache.path(), 88)));
    CHECK(std::filesystem::exists(unrelated));
}

TEST_CASE("processes that loaded a library at other addresses share its opening and get the same frames") {
    // A job's ranks load the same libraries, each where its own address space put them.
    const FixtureSite site = call_fixture(kFixtureWidget);
    std::vector<Module> here = loaded_modules();
    const Module& fixture_here = fixture_module(here);
    constexpr uint64_t kElsewhere = 0x1000'0000'0000;
    std::vector<Module> elsewhere;
    for (Module module : here) {
        if (module.path == fixture_here.path) {
            module.load_address += kElsewhere;
            module.low += kElsewhere;
            module.high += kElsewhere;
        }
        elsewhere.push_back(module);
    }
    const auto registry = std::make_shared<ModuleRegistry>();
    Symbolizer first(here, registry);
    Symbolizer second(elsewhere, registry);
    const std::vector<SourceFrame> frames = first.symbolize(site.return_address);
    const std::vector<SourceFrame>& moved = second.symbolize(site.return_address + kElsewhere);
    REQUIRE(frames.front().symbolized);
    CHECK(frames.front().function == "fixture::Widget::make(int)");
    REQUIRE(moved.size() == frames.size());
    for (size_t i = 0; i < frames.size(); ++i) {
        CHECK(moved[i].function == frames[i].function);
        CHECK(moved[i].file == frames[i].file);
        CHECK(moved[i].line == frames[i].line);
        CHECK(moved[i].module_offset == frames[i].module_offset);
    }
    CHECK(registry->size() == 1);
}
