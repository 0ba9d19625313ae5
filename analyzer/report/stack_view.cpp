#include "report/stack_view.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "python/program_files.h"
#include "report/python_interleave.h"

namespace gpuleak::analyzer {

namespace {

StackLine shown(const ReportFrame* frame) {
    StackLine line;
    line.frame = frame;
    return line;
}

StackLine left_out(StackLine::Kind kind, size_t count) {
    StackLine line;
    line.kind = kind;
    line.count = count;
    return line;
}

bool is_python(const ReportFrame& frame) {
    return frame.python;
}

std::vector<StackLine> all_frames(const std::vector<ReportFrame>& frames, size_t depth) {
    std::vector<StackLine> lines;
    for (size_t i = 0; i < frames.size() && i < depth; ++i)
        lines.push_back(shown(&frames[i]));
    if (frames.size() > depth)
        lines.push_back(left_out(StackLine::Kind::MoreLeftOut, frames.size() - depth));
    return lines;
}

// A library's frames without line information are its internals (a release build's, such as
// PyTorch's): the program's own, built with -g, keep a line each.
bool library_internal(const ReportFrame& frame) {
    return !frame.python && frame.file.empty();
}

// The line of `frame`, standing for the library-internal frames of its library that follow it while
// `belongs` says they may: `frame` is left at the last of them.
template <class Frame, class Belongs> StackLine library_run(Frame& frame, Frame end, Belongs&& belongs) {
    StackLine line = shown(&*frame);
    line.library = library_of(*frame);
    if (!library_internal(*frame))
        return line;
    for (auto next = std::next(frame);
         next != end && belongs(*next) && library_internal(*next) && library_of(*next) == line.library;
         ++next) {
        ++line.same_library;
        frame = next;
    }
    return line;
}

// Like all_frames, one line for each run of library-internal frames of one library.
std::vector<StackLine> native_frames(const std::vector<ReportFrame>& frames, size_t depth) {
    std::vector<StackLine> lines;
    size_t frames_shown = 0;
    for (auto frame = frames.begin(); frame != frames.end(); ++frame) {
        if (lines.size() == depth) {
            lines.push_back(left_out(StackLine::Kind::MoreLeftOut, frames.size() - frames_shown));
            break;
        }
        lines.push_back(library_run(frame, frames.end(), [](const ReportFrame&) { return true; }));
        frames_shown += 1 + lines.back().same_library;
    }
    return lines;
}

// Native frames left out together: one line, unless they are all the interpreter's.
class NativeRun {
  public:
    void add(bool interpreter) {
        ++frames_;
        foreign_ = foreign_ || !interpreter;
    }
    void flush(std::vector<StackLine>& lines) {
        if (foreign_)
            lines.push_back(left_out(StackLine::Kind::NativeLeftOut, frames_));
        *this = {};
    }

  private:
    size_t frames_ = 0;
    bool foreign_ = false;
};

} // namespace

std::vector<StackLine> stack_lines(const std::vector<ReportFrame>& frames, const ReportOptions& options) {
    const size_t depth = options.stack_depth;
    if (options.native)
        return all_frames(frames, depth);
    if (std::none_of(frames.begin(), frames.end(), is_python))
        return native_frames(frames, depth);

    std::set<std::string> interpreter_modules;
    for (const ReportFrame& frame : frames)
        if (is_evaluation_loop(frame))
            interpreter_modules.insert(frame.module);
    const auto is_interpreter = [&](const ReportFrame& frame) {
        return !frame.python && interpreter_modules.contains(frame.module);
    };

    std::vector<StackLine> lines;
    auto frame = frames.begin();
    size_t native_shown = 0;
    const auto native_above = [&](const ReportFrame& next) { return !next.python && !is_interpreter(next); };
    for (; frame != frames.end() && native_above(*frame) && native_shown < depth; ++frame, ++native_shown)
        lines.push_back(library_run(frame, frames.end(), native_above));
    NativeRun run;
    size_t python_shown = 0;
    const auto library_python = [](const ReportFrame& next) {
        return next.python && !is_program_frame(next);
    };
    for (; frame != frames.end(); ++frame) {
        if (!frame->python) {
            run.add(is_interpreter(*frame));
            continue;
        }
        if (python_shown == depth) {
            lines.push_back(left_out(StackLine::Kind::MorePythonLeftOut,
                                     static_cast<size_t>(std::count_if(frame, frames.end(), is_python))));
            return lines;
        }
        run.flush(lines);
        // A package's frames between the program's are one line; the interpreter's native frames
        // between them are glue, and left out with them.
        if (library_python(*frame)) {
            StackLine line = shown(&*frame);
            line.library = library_of(*frame);
            auto next = std::next(frame);
            auto last = frame;
            for (; next != frames.end(); ++next) {
                if (!next->python) {
                    if (!is_interpreter(*next))
                        break;
                    continue;
                }
                if (!library_python(*next) || library_of(*next) != line.library)
                    break;
                ++line.same_library;
                last = next;
            }
            lines.push_back(std::move(line));
            frame = last;
        } else {
            lines.push_back(shown(&*frame));
        }
        ++python_shown;
    }
    // What is left below the outermost Python frame is the interpreter's or its thread's start.
    return lines;
}

namespace {

// Where a scan back over a name's brackets starts: before a trailing operator's name, whose angle
// brackets and parentheses ("operator<<", "operator->", "operator()") are not brackets.
size_t before_operator(const std::string& name) {
    const size_t at = name.rfind("operator");
    return at == std::string::npos ? name.size() : at;
}

// How deep in brackets of all kinds the character at `at` is (0: at the top level of the name).
int depth_at(const std::string& name, size_t at) {
    int depth = 0;
    for (size_t i = 0; i < at; ++i) {
        const char c = name[i];
        if (c == '<' || c == '(' || c == '{' || c == '[')
            ++depth;
        else if (c == '>' || c == ')' || c == '}' || c == ']')
            --depth;
    }
    return depth;
}

} // namespace

std::string short_function_name(const std::string& demangled) {
    std::string name = demangled;
    // GCC's specialised copies: "f(int) [clone .isra.0]", "f(int) [clone .constprop.0] [clone .cold]".
    if (const size_t clone = name.find(" [clone "); clone != std::string::npos && name.ends_with("]"))
        name.erase(clone);
    // The parameter list: from the '(' that matches the last ')' at depth 0 of parentheses and angle
    // brackets, scanning back over the qualifiers after it.
    const size_t close = name.rfind(')');
    if (close != std::string::npos &&
        name.find_first_not_of(" constvolatile&", close + 1) == std::string::npos) {
        int depth = 0;
        for (size_t i = close + 1; i-- > 0;) {
            const char c = name[i];
            if (c == ')' || c == '>')
                ++depth;
            else if (c == '(' || c == '<')
                --depth;
            if (depth == 0 && c == '(') {
                // A name without its parameters ("Foo::operator()", from DWARF) keeps the operator's own.
                if (!std::string_view(name.data(), i).ends_with("operator"))
                    name.erase(i);
                break;
            }
        }
    }
    // Template arguments too long to read at a glance (a kernel functor's whole signature): "<...>".
    constexpr size_t kLongArguments = 32;
    std::string shortened;
    for (size_t i = 0; i < name.size(); ++i) {
        const std::string_view before(name.data(), i);
        if (name[i] != '<' || before.ends_with("operator") || before.ends_with("operator<")) {
            shortened += name[i];
            continue;
        }
        int open = 0;
        size_t end = i;
        for (; end < name.size(); ++end) {
            if (name[end] == '<')
                ++open;
            else if (name[end] == '>' && --open == 0)
                break;
        }
        if (end == name.size() || end - i - 1 <= kLongArguments) {
            shortened += name[i];
            continue;
        }
        shortened += "<...>";
        i = end;
    }
    name = std::move(shortened);
    // A return type: whatever precedes the last space at depth 0 (the demangler's "{lambda()#1}" and
    // "{default arg#1}" are brackets too).
    for (size_t i = before_operator(name); i-- > 0;)
        if (name[i] == ' ' && depth_at(name, i) == 0)
            return name.substr(i + 1);
    return name;
}

std::string innermost_scopes(const std::string& name, size_t scopes) {
    for (size_t i = before_operator(name); i-- > 1;)
        if (name[i] == ':' && name[i - 1] == ':' && depth_at(name, i) == 0 && --scopes == 0)
            return name.substr(i + 1);
    return name;
}

namespace {

// The installed package a file lies in ("torch" for .../site-packages/torch/...); empty for another.
std::string package_of(const std::string& file) {
    for (const char* marker : {"/site-packages/", "/dist-packages/"}) {
        const size_t at = file.rfind(marker);
        if (at != std::string::npos) {
            const size_t start = at + std::strlen(marker);
            std::string package = file.substr(start, file.find('/', start) - start);
            // A module of its own ("six.py") is named as it is imported.
            if (package.ends_with(".py"))
                package.resize(package.size() - 3);
            return package;
        }
    }
    return {};
}

} // namespace

std::string library_of(const ReportFrame& frame) {
    if (!frame.python)
        return std::filesystem::path(frame.module).filename().string();
    if (is_program_frame(frame))
        return "";
    const std::string package = package_of(frame.file);
    return package.empty() ? "the standard library" : package;
}

bool is_caching_allocator_frame(const ReportFrame& frame) {
    return !frame.python && frame.function.starts_with("c10::cuda::CUDACachingAllocator::");
}

bool is_cuda_library_frame(const ReportFrame& frame) {
    const std::string file = std::filesystem::path(frame.module).filename().string();
    return !frame.python && (file.starts_with("libcudart.so") || file.starts_with("libcuda.so"));
}

std::string library_purpose(const std::vector<ReportFrame>& frames) {
    // Functions of PyTorch's (ATen's) that only these paths call.
    constexpr std::string_view kBlasWorkspace[] = {"at::cuda::getCurrentCUDABlasHandle",
                                                   "at::cuda::getCUDABlasLtWorkspace",
                                                   "at::cuda::setWorkspaceForHandle"};
    constexpr std::string_view kAutogradThread = "torch::autograd::Engine::thread_main";
    bool autograd_thread = false;
    bool python = false;
    for (const ReportFrame& frame : frames) {
        if (frame.python) {
            python = true;
            continue;
        }
        for (const std::string_view function : kBlasWorkspace)
            if (frame.function.starts_with(function))
                return "cuBLAS's workspace, which PyTorch keeps for the rest of the process";
        autograd_thread = autograd_thread || frame.function.starts_with(kAutogradThread);
    }
    return autograd_thread && !python ? "in backward(), on PyTorch's autograd thread" : "";
}

AllocatorFrames allocator_frames(const std::vector<ReportFrame>& frames) {
    // Where the BFC allocator grows its pool: XLA's (tsl::) and TensorFlow's before XLA shared it.
    constexpr std::string_view kExtend[] = {"tsl::BFCAllocator::Extend", "tensorflow::BFCAllocator::Extend"};
    // TensorFlow's allocator for TF_GPU_ALLOCATOR=cuda_malloc_async, in either namespace it had.
    constexpr std::string_view kPerTensor = "GpuCudaMallocAsyncAllocator::";
    // What runs an XLA-compiled step (XLA's executables) or compiles one.
    constexpr std::string_view kXla = "xla::";
    bool extends = false;
    bool jax = false;
    bool tensorflow = false;
    AllocatorFrames found;
    for (const ReportFrame& frame : frames) {
        for (const std::string_view function : kExtend)
            extends = extends || frame.function.starts_with(function);
        found.tensorflow_per_tensor =
            found.tensorflow_per_tensor || frame.function.find(kPerTensor) != std::string::npos;
        found.xla = found.xla || (!frame.python && frame.function.starts_with(kXla));
        // The packages jax, jaxlib and jax_plugins (XLA's CUDA plugin), libjax_common.so; tensorflow,
        // libtensorflow_framework.so.2.
        const std::string library = library_of(frame);
        const std::string package = frame.python ? library : package_of(frame.module);
        jax = jax || library.find("jax") != std::string::npos || package.starts_with("jax");
        tensorflow = tensorflow || library.find("tensorflow") != std::string::npos || package == "tensorflow";
    }
    if (extends)
        found.pool = jax ? PoolOwner::Jax : tensorflow ? PoolOwner::TensorFlow : PoolOwner::Unknown;
    found.tensorflow_per_tensor = found.tensorflow_per_tensor && tensorflow;
    return found;
}

namespace {

// The working directory when the report began, with a trailing '/'; empty where it cannot be read.
const std::string& working_directory() {
    static const std::string directory = [] {
        std::error_code error;
        std::string path = std::filesystem::current_path(error).string();
        if (error || path.empty())
            return std::string();
        return path.back() == '/' ? path : path + '/';
    }();
    return directory;
}

} // namespace

std::string short_path(const std::string& file) {
    for (const char* marker : {"/site-packages/", "/dist-packages/"}) {
        const size_t at = file.rfind(marker);
        if (at != std::string::npos)
            return file.substr(at + std::strlen(marker));
    }
    const std::string& directory = working_directory();
    // The root is no project: "/srv/train.py" stays as it is.
    if (directory.size() > 1 && file.size() > directory.size() && file.starts_with(directory))
        return file.substr(directory.size());
    return file;
}

std::vector<const ReportFrame*> shown_frames(const std::vector<ReportFrame>& frames,
                                             const ReportOptions& options) {
    std::vector<const ReportFrame*> shown;
    for (const StackLine& line : stack_lines(frames, options)) {
        if (line.kind != StackLine::Kind::Frame)
            continue;
        shown.push_back(line.frame);
        // The frames its line stands for: those of the same library after it, of its own sort (a run of
        // Python frames leaves out the interpreter's among them).
        size_t more = line.same_library;
        for (auto next = frames.begin() + (line.frame - frames.data()) + 1; more > 0 && next != frames.end();
             ++next)
            if (next->python == line.frame->python) {
                shown.push_back(&*next);
                --more;
            }
    }
    return shown;
}

ProfileName profile_name(const ReportFrame& frame, const ReportOptions& options) {
    if (frame.python)
        return {frame.function.empty() ? "?" : frame.function,
                frame.source_name.empty() ? frame.file : frame.source_name};
    std::string function = frame.function.empty() ? fmt::format("{}+{:#x}", frame.module, frame.module_offset)
                           : options.full_names   ? frame.function
                                                  : short_function_name(frame.function);
    return {std::move(function), frame.file.empty() ? frame.module : frame.file};
}

std::vector<const ReportFrame*> profile_frames(const std::vector<ReportFrame>& frames,
                                               const ReportOptions& options) {
    ReportOptions whole = options;
    whole.stack_depth = std::numeric_limits<size_t>::max();
    return shown_frames(frames, whole);
}

bool is_program_frame(const ReportFrame& frame) {
    return frame.python && (!frame.source_name.empty() || is_program_file(frame.file));
}

namespace {

// The last part of a qualified name: "convert" of "Module.to.<locals>.convert".
std::string_view last_name(std::string_view qualname) {
    const size_t dot = qualname.rfind('.');
    return dot == std::string_view::npos ? qualname : qualname.substr(dot + 1);
}

// A library function a reader would name: not private ("_call_impl"; dunders such as "__getitem__" are
// public), not defined inside another function (a decorator's "wrapper") and not a comprehension's or a
// lambda's ("<lambda>").
bool public_function(const ReportFrame& frame) {
    const std::string_view name = last_name(frame.function);
    const bool dunder = name.size() > 4 && name.starts_with("__") && name.ends_with("__");
    return !name.empty() && (!name.starts_with('_') || dunder) && !name.starts_with('<') &&
           frame.function.find("<locals>") == std::string::npos;
}

// A frame of an installed package's own Python code: not the program's, not the standard library's.
bool package_frame(const ReportFrame& frame) {
    return frame.python && !is_program_frame(frame) && !package_of(frame.file).empty();
}

// The PyTorch operator a native frame is the dispatcher's entry of ("mm" of "at::_ops::mm::call"), or
// empty. Every operator PyTorch runs passes through one.
std::string operator_name(const ReportFrame& frame) {
    constexpr std::string_view kOps = "at::_ops::";
    const std::string_view function = frame.function;
    if (frame.python || !function.starts_with(kOps))
        return {};
    const std::string_view rest = function.substr(kOps.size());
    const size_t end = rest.find("::");
    if (end == std::string_view::npos || end == 0)
        return {};
    const std::string_view entry = rest.substr(end + 2);
    if (!entry.starts_with("call") && !entry.starts_with("redispatch"))
        return {};
    return std::string(rest.substr(0, end));
}

// What frames [begin, end) of a stack, innermost first, called into, outermost first (ProgramView::calls).
std::vector<std::string> calls_of(std::vector<ReportFrame>::const_iterator begin,
                                  std::vector<ReportFrame>::const_iterator end) {
    std::vector<const ReportFrame*> named;
    const ReportFrame* innermost_package = nullptr;
    for (auto frame = begin; frame != end; ++frame) {
        if (!package_frame(*frame))
            continue;
        if (innermost_package == nullptr)
            innermost_package = &*frame;
        if (public_function(*frame))
            named.push_back(&*frame);
    }
    if (named.empty() && innermost_package != nullptr)
        named.push_back(innermost_package);
    std::reverse(named.begin(), named.end()); // outermost first
    std::vector<std::string> calls;
    std::string previous;
    for (const ReportFrame* frame : named) {
        const std::string package = package_of(frame->file);
        if (package == previous)
            continue; // a run of one package: its outermost function says what the line called
        calls.push_back(package + " " + frame->function);
        previous = package;
    }
    // The innermost operator that does more than make an empty tensor: the one that made the memory for
    // what it computes ("mm", "nll_loss_forward", "_to_copy"); an empty tensor's own where that is all.
    std::string made_by;
    for (auto frame = begin; frame != end; ++frame) {
        std::string name = operator_name(*frame);
        if (name.empty())
            continue;
        if (!name.starts_with("empty") && !name.starts_with("new_empty") && !name.starts_with("_empty")) {
            made_by = std::move(name);
            break;
        }
        if (made_by.empty())
            made_by = std::move(name);
    }
    if (!made_by.empty())
        calls.push_back(std::move(made_by));
    if (calls.size() > kMostCalls) {
        calls.erase(calls.begin() + 2, calls.end() - 1);
        calls.insert(calls.end() - 1, "…");
    }
    return calls;
}

} // namespace

ProgramView program_view(const std::vector<ReportFrame>& frames) {
    ProgramView view;
    const auto own = std::find_if(frames.begin(), frames.end(), is_program_frame);
    if (own == frames.end()) {
        view.calls = calls_of(frames.begin(), frames.end());
        return view;
    }
    view.own = &*own;
    view.calls = calls_of(frames.begin(), own);
    std::string between; // the package of the latest run of library frames since the last caller
    size_t program_callers = 0;
    for (auto frame = std::next(own); frame != frames.end(); ++frame) {
        if (is_program_frame(*frame)) {
            if (program_callers == kMostCallers) {
                ++view.callers_left_out;
                continue;
            }
            ++program_callers;
            view.callers.push_back({&*frame, {}});
            between.clear();
        } else if (package_frame(*frame) && public_function(*frame) && program_callers < kMostCallers) {
            // A library that runs the program's code (a trainer's loop); not the glue that calls a
            // module's forward (torch's private Module._call_impl).
            const std::string package = package_of(frame->file);
            if (package != between)
                view.callers.push_back({nullptr, package});
            between = package;
        }
    }
    // Library frames outermost of all (a runner such as a launcher's) are no caller of the program's.
    while (!view.callers.empty() && view.callers.back().frame == nullptr)
        view.callers.pop_back();
    return view;
}

namespace {

// Where a Python frame is: "cell [12], line 4" for a named source, else "train.py:88"; without a line,
// the source's name or the file alone.
std::string python_place(const ReportFrame& frame) {
    if (!frame.source_name.empty())
        return frame.line == 0 ? frame.source_name
                               : fmt::format("{}, line {}", frame.source_name, frame.line);
    const std::string file = frame.file.empty() ? std::string("?") : short_path(frame.file);
    return frame.line == 0 ? file : fmt::format("{}:{}", file, frame.line);
}

std::string function_name(const ReportFrame& frame) {
    return frame.function.empty() ? std::string("?") : frame.function;
}

} // namespace

ProgramLine program_line(const ReportFrame& frame) {
    if (frame.source_line.empty())
        return {python_frame_name(frame), {}};
    std::string where = python_place(frame);
    if (frame.function != "<module>")
        where += " in " + function_name(frame);
    return {std::move(where), frame.source_line};
}

std::string python_frame_name(const ReportFrame& frame) {
    if (!frame.source_name.empty())
        return frame.source_line.empty() ? fmt::format("{} in {}", python_place(frame), function_name(frame))
                                         : fmt::format("{} in {} (`{}`)", python_place(frame),
                                                       function_name(frame), frame.source_line);
    if (frame.file.empty() && frame.function.empty())
        return "a Python frame whose code object was not recorded";
    return fmt::format("{} in {}", python_place(frame), function_name(frame));
}

} // namespace gpuleak::analyzer
