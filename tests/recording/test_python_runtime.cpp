#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "python/python_code_object.h"
#include "python/python_debug_offsets.h"
#include "python/python_frames.h"
#include "python/python_runtime.h"

using namespace gpuleak;

namespace {

// A _Py_DebugOffsets image built from CPython's declaration: groups of uint64_t members, in order.
struct Group {
    std::string name;
    std::vector<std::string> members;
};

const std::vector<Group> k313Groups = {
    {"runtime_state", {"size", "finalizing", "interpreters_head"}},
    {"interpreter_state",
     {"size", "id", "next", "threads_head", "gc", "imports_modules", "sysdict", "builtins", "ceval_gil",
      "gil_runtime_state", "gil_runtime_state_enabled", "gil_runtime_state_locked",
      "gil_runtime_state_holder"}},
    {"thread_state",
     {"size", "prev", "next", "interp", "current_frame", "thread_id", "native_thread_id", "datastack_chunk",
      "status"}},
    {"interpreter_frame", {"size", "previous", "executable", "instr_ptr", "localsplus", "owner"}},
    {"code_object",
     {"size", "filename", "name", "qualname", "linetable", "firstlineno", "argcount", "localsplusnames",
      "localspluskinds", "co_code_adaptive"}},
    {"pyobject", {"size", "ob_type"}},
    {"type_object", {"size", "tp_name", "tp_repr", "tp_flags"}},
    {"tuple_object", {"size", "ob_item", "ob_size"}},
    {"list_object", {"size", "ob_item", "ob_size"}},
    {"dict_object", {"size", "ma_keys", "ma_values"}},
    {"float_object", {"size", "ob_fval"}},
    {"long_object", {"size", "lv_tag", "ob_digit"}},
    {"bytes_object", {"size", "ob_size", "ob_sval"}},
    {"unicode_object", {"size", "state", "length", "asciiobject_size"}},
    {"gc", {"size", "collecting"}},
};

const std::vector<Group> k314Groups = {
    {"runtime_state", {"size", "finalizing", "interpreters_head"}},
    {"interpreter_state",
     {"size", "id", "next", "threads_head", "threads_main", "gc", "imports_modules", "sysdict", "builtins",
      "ceval_gil", "gil_runtime_state", "gil_runtime_state_enabled", "gil_runtime_state_locked",
      "gil_runtime_state_holder", "code_object_generation", "tlbc_generation"}},
    {"thread_state",
     {"size", "prev", "next", "interp", "current_frame", "thread_id", "native_thread_id", "datastack_chunk",
      "status"}},
    {"interpreter_frame",
     {"size", "previous", "executable", "instr_ptr", "localsplus", "owner", "stackpointer", "tlbc_index"}},
    {"code_object",
     {"size", "filename", "name", "qualname", "linetable", "firstlineno", "argcount", "localsplusnames",
      "localspluskinds", "co_code_adaptive", "co_tlbc"}},
    {"pyobject", {"size", "ob_type"}},
    {"type_object", {"size", "tp_name", "tp_repr", "tp_flags"}},
    {"tuple_object", {"size", "ob_item", "ob_size"}},
    {"list_object", {"size", "ob_item", "ob_size"}},
    {"set_object", {"size", "used", "table", "mask"}},
    {"dict_object", {"size", "ma_keys", "ma_values"}},
    {"float_object", {"size", "ob_fval"}},
    {"long_object", {"size", "lv_tag", "ob_digit"}},
    {"bytes_object", {"size", "ob_size", "ob_sval"}},
    {"unicode_object", {"size", "state", "length", "asciiobject_size"}},
    {"gc", {"size", "collecting"}},
    {"gen_object", {"size", "gi_name", "gi_iframe", "gi_frame_state"}},
    {"llist_node", {"next", "prev"}},
    {"debugger_support",
     {"eval_breaker", "remote_debugger_support", "remote_debugging_enabled", "debugger_pending_call",
      "debugger_script_path", "debugger_script_path_size"}},
};

class DebugOffsetsImage {
  public:
    DebugOffsetsImage(const std::vector<Group>& groups, uint64_t version_hex) {
        std::memcpy(words_.data(), "xdebugpy", 8);
        words_.push_back(version_hex);
        words_.push_back(0); // free_threaded
        for (const Group& group : groups) {
            for (const std::string& member : group.members) {
                index_[group.name + "." + member] = words_.size();
                // Sizes large enough for every offset below; offsets distinct per member.
                words_.push_back(member == "size" ? 4096 : 8 * words_.size());
            }
        }
        set("unicode_object.length", 16);
        set("unicode_object.state", 32);
        set("unicode_object.asciiobject_size", 40);
        set("unicode_object.size", 64);
    }
    void set(const std::string& member, uint64_t value) { words_[index_.at(member)] = value; }
    uint64_t get(const std::string& member) const { return words_[index_.at(member)]; }
    void set_free_threaded() { words_[2] = 1; }
    void set_cookie(const char* cookie) { std::memcpy(words_.data(), cookie, 8); }
    const void* data() const { return words_.data(); }

  private:
    std::vector<uint64_t> words_{0};
    std::map<std::string, size_t> index_;
};

void check_layout(const DebugOffsetsImage& image, const PythonLayout& layout) {
    CHECK(layout.runtime_finalizing == image.get("runtime_state.finalizing"));
    CHECK(layout.frame_link == PythonFrameLink::thread_state);
    CHECK(layout.thread_frame == image.get("thread_state.current_frame"));
    CHECK(layout.frame_previous == image.get("interpreter_frame.previous"));
    CHECK(layout.frame_code == image.get("interpreter_frame.executable"));
    CHECK(layout.frame_instruction == image.get("interpreter_frame.instr_ptr"));
    CHECK(layout.instruction_kind == PythonInstructionKind::code_unit_ptr);
    CHECK(layout.frame_has_owner);
    CHECK(layout.frame_owner == image.get("interpreter_frame.owner"));
    CHECK(layout.first_shim_owner == 3);
    CHECK(layout.code_filename == image.get("code_object.filename"));
    CHECK(layout.code_qualname == image.get("code_object.qualname"));
    CHECK(layout.code_first_line == image.get("code_object.firstlineno"));
    CHECK(layout.code_line_table == image.get("code_object.linetable"));
    CHECK(layout.code_bytecode == image.get("code_object.co_code_adaptive"));
    CHECK(layout.object_type == image.get("pyobject.ob_type"));
    CHECK(layout.bytes_size == image.get("bytes_object.ob_size"));
    CHECK(layout.bytes_data == image.get("bytes_object.ob_sval"));
    CHECK(layout.unicode_length == 16);
    CHECK(layout.unicode_state == 32);
    CHECK(layout.unicode_ascii_data == 40);
    CHECK(layout.unicode_compact_data == 56);
    // What the search for a multiprocessing child's target reads (python_process_target.h).
    CHECK(layout.interpreter_threads == image.get("interpreter_state.threads_head"));
    CHECK(layout.thread_next == image.get("thread_state.next"));
    CHECK(layout.frame_locals == image.get("interpreter_frame.localsplus"));
    CHECK(layout.code_local_names == image.get("code_object.localsplusnames"));
    CHECK(layout.tuple_size == image.get("tuple_object.ob_size"));
    CHECK(layout.tuple_items == image.get("tuple_object.ob_item"));
    CHECK(layout.long_size == image.get("long_object.lv_tag"));
    CHECK(layout.long_size_tagged);
    CHECK(layout.long_digits == image.get("long_object.ob_digit"));
}

} // namespace

TEST_CASE("_Py_DebugOffsets of 3.13 and 3.14 give the layout the walker reads") {
    PythonLayout layout;
    uint16_t version = 0;

    const DebugOffsetsImage image313(k313Groups, 0x030d01f0);
    REQUIRE(read_debug_offsets(image313.data(), layout, version) == DebugOffsetsResult::ok);
    CHECK(version == python_version(3, 13));
    CHECK(layout.version == python_version(3, 13));
    CHECK_FALSE(layout.frame_code_tagged);
    check_layout(image313, layout);

    const DebugOffsetsImage image314(k314Groups, 0x030e00f0);
    REQUIRE(read_debug_offsets(image314.data(), layout, version) == DebugOffsetsResult::ok);
    CHECK(version == python_version(3, 14));
    CHECK(layout.frame_code_tagged);
    check_layout(image314, layout);
}

TEST_CASE("_Py_DebugOffsets that the walker cannot use are refused, with the reason") {
    PythonLayout layout;
    uint16_t version = 0;

    DebugOffsetsImage no_cookie(k313Groups, 0x030d00f0);
    no_cookie.set_cookie("notdebug");
    CHECK(read_debug_offsets(no_cookie.data(), layout, version) == DebugOffsetsResult::no_cookie);

    DebugOffsetsImage free_threaded(k314Groups, 0x030e00f0);
    free_threaded.set_free_threaded();
    CHECK(read_debug_offsets(free_threaded.data(), layout, version) == DebugOffsetsResult::free_threaded);

    const DebugOffsetsImage future(k314Groups, 0x030f00a1);
    CHECK(read_debug_offsets(future.data(), layout, version) == DebugOffsetsResult::unknown_version);
    CHECK(version == python_version(3, 15));

    DebugOffsetsImage outside(k313Groups, 0x030d00f0);
    outside.set("code_object.qualname", 5000);
    CHECK(read_debug_offsets(outside.data(), layout, version) == DebugOffsetsResult::implausible);
}

TEST_CASE("without Python in the process the walker is inert") {
    CHECK(python_runtime() == nullptr);
    PythonFrame frames[4];
    bool finalizing = false;
    CHECK(capture_python_frames(frames, 4, finalizing) == 0);
    CHECK_FALSE(finalizing);
    CHECK_FALSE(python_finalizing());
    PythonCodeIdentity identity;
    CHECK_FALSE(read_python_code_identity(0x1000, identity));
    PythonCodeDescription description;
    CHECK_FALSE(describe_python_code(0x1000, {}, description));
}
