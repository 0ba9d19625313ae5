// Frames a module's debug info gave before, kept on disk between reports, so that reporting again on
// the same libraries skips reading their DWARF: inflating libc's compressed separate debug info alone
// costs more than the rest of a report of a million events.
//
// One file per module build id under the cache directory, "<build id>.frames", holding the module
// offsets of return addresses and their frames, and the files they came from: the module's file, the
// file its DWARF was in, and the places a separate debug file is looked for by build id, each with its
// size and modification time or its absence. The entries are used only while every one of those files
// is as it was and the search path and the file opened for the module are the same, so installing a
// debug package, rebuilding a library or pointing --debug-dir elsewhere makes the module be read again.
// A file that cannot be read, or that does not parse, counts as no entries; writing is best effort
// (atomic: a temporary file renamed over the old one) and never fails a report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "symbols/source_frame.h"

namespace gpuleak::analyzer {

// Where reports keep the cache unless told otherwise: $GPULEAK_CACHE_DIR, else
// $XDG_CACHE_HOME/gpuleak/symbols, else $HOME/.cache/gpuleak/symbols; empty (no cache) without any.
std::string default_symbol_cache_directory();

// What the frames of one module were read from, for telling whether they still hold.
struct FrameSources {
    std::string debuginfo_path; // the search path, in elfutils' syntax, as the symbolizer was given it
    std::string module_file;    // the file opened for the module: its recorded path or a build-id file
    // Files whose contents or absence the frames depend on: the module's file, the DWARF file, and the
    // build-id places searched for a separate debug file.
    std::vector<std::string> files;
};

class ModuleFrameCache {
  public:
    using Frames = std::vector<SourceFrame>;

    // Reads the entries of the module with `build_id` from `directory`, if they were made from these
    // sources (module_file and debuginfo_path equal, every file as recorded). Empty `directory` or
    // `build_id`: no cache, nothing is read or written.
    ModuleFrameCache(std::string directory, const std::vector<uint8_t>& build_id,
                     const std::string& debuginfo_path, const std::string& module_file);

    // The frames at a module offset, as add() was given them; null when there are none.
    [[nodiscard]] const Frames* find(uint64_t module_offset) const;
    // Takes frames for a module offset; only their function, file, line, inlined and symbolized are kept.
    void add(uint64_t module_offset, const Frames& frames);

    [[nodiscard]] bool has_additions() const { return added_; }
    // Writes the entries, old and added, when anything was added, with the files in `sources` as they
    // are now; nothing when `sources` has no files. Errors are ignored: the cache only saves time.
    void save(const FrameSources& sources) const;

  private:
    std::string file_; // empty: no cache
    std::string debuginfo_path_;
    std::string module_file_;
    std::unordered_map<uint64_t, Frames> entries_;
    bool added_ = false;
};

} // namespace gpuleak::analyzer
