// How the report shows one stack: which of its frames, and how a Python frame reads.
//
// A stack without Python frames shows its innermost --stack-depth frames. A stack with Python frames
// shows, by default, what a Python programmer acts on: the native frames that made the CUDA call, down
// to where the interpreter called them (which allocator, which operator, which binding), one line for
// each run of them in one library, then the Python frames only, one line for each run of frames in one
// installed package (torch, IPython) between the program's own; the native frames below the outermost
// Python frame (the interpreter's or its thread's start) are left out. The interpreter's own frames (those of
// the module that holds its evaluation loop) between and around Python frames are left out without a trace:
// they are the same glue in every stack. Any other native frames left out between Python frames, such as a C
// extension that called back into Python, are one line "... N native frames" each run. Both parts, the native
// frames above and the Python frames, are limited to --stack-depth frames each, so a deep native library
// never hides the Python lines. With --native, every frame is shown in order, up to --stack-depth.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "report/report.h"

namespace gpuleak::analyzer {

struct StackLine {
    enum class Kind {
        Frame,
        NativeLeftOut,     // `count` native frames left out here
        MoreLeftOut,       // `count` more frames, past the depth
        MorePythonLeftOut, // `count` more Python frames, past the depth
    };
    Kind kind = Kind::Frame;
    const ReportFrame* frame = nullptr; // Kind::Frame: a frame of the stack given
    size_t count = 0;
    // Kind::Frame: the frames after it, in the same library or the same installed Python package, that
    // this line stands for (see stack_lines), and that library's or package's name.
    size_t same_library = 0;
    std::string library;
};

// `frames`: the whole stack, innermost first (StackFrames::frames).
std::vector<StackLine> stack_lines(const std::vector<ReportFrame>& frames, const ReportOptions& options);

// The frames of stack_lines() alone, without the lines that stand for frames left out: what a list of
// frames (JSON, a PyTorch snapshot) holds.
std::vector<const ReportFrame*> shown_frames(const std::vector<ReportFrame>& frames,
                                             const ReportOptions& options);

// The frames of shown_frames() without the depth limit: what a profile or a flame graph draws, whose
// roots must be the stack's outermost frames.
std::vector<const ReportFrame*> profile_frames(const std::vector<ReportFrame>& frames,
                                               const ReportOptions& options);

// A frame as a profile or a flame graph names it: its function (a Python frame's qualified name, "?"
// where unknown; a native function without its parameter list unless --full-names, or module+offset)
// and its file (a named source's name, else the file, else a native frame's module).
struct ProfileName {
    std::string function;
    std::string file;
};
ProfileName profile_name(const ReportFrame& frame, const ReportOptions& options);

// Whether a Python frame is the program's own code: not an installed package's (site-packages,
// dist-packages), the standard library's, the interpreter's frozen modules or gpuleak's own package.
bool is_program_frame(const ReportFrame& frame);

// A native function's name as the report shows it by default: without its parameter list, its
// qualifiers after it and the return type a template's name starts with.
std::string short_function_name(const std::string& demangled);

// The last `scopes` components of a qualified name ("DeviceCachingAllocator::malloc" of 2), or all of it.
std::string innermost_scopes(const std::string& name, size_t scopes);

// The installed package a Python frame's file belongs to ("torch" for .../site-packages/torch/...), or
// the library a native frame's is ("libc10_cuda.so"); empty for the program's own code.
std::string library_of(const ReportFrame& frame);

// A frame of PyTorch's caching allocator itself, which every block and segment it makes passes through.
bool is_caching_allocator_frame(const ReportFrame& frame);

// Whether a native frame is the CUDA runtime's or driver's own (libcudart, libcuda): where a context is
// made inside the call that first used a device, the call's caller is the place to name.
bool is_cuda_library_frame(const ReportFrame& frame);

// What a library keeps the memory a stack made for, where its native frames say so ("cuBLAS's workspace,
// which PyTorch keeps for the rest of the process"), or where a thread of the library's own made it
// ("in backward(), on PyTorch's autograd thread"); empty otherwise.
std::string library_purpose(const std::vector<ReportFrame>& frames);

// What a stack says of the framework allocator that made it: whose pool it extends, the BFC allocator's
// (XLA's, so JAX's, or TensorFlow's), which reserves device memory and hands out arrays inside it itself,
// told by the frameworks' frames beside it; whether TensorFlow's cuda_malloc_async allocator made it; and
// whether an XLA-compiled step ran.
AllocatorFrames allocator_frames(const std::vector<ReportFrame>& frames);

// A stack as the author of a Python program reads it: the line of their own code that asked for the
// memory, what that line called (a library's functions and the operator that allocated), and their own
// code that called it. What the text report shows for a stack with a frame of the program's own, unless
// --native.
struct ProgramView {
    const ReportFrame* own = nullptr; // the innermost frame of the program's own code
    // What `own` called, outermost first: for each run of one installed package's frames, its outermost
    // public function ("transformers GPT2LMHeadModel.forward", "torch Linear.forward"; the package named
    // once per run), then the PyTorch operator that allocated ("mm"). Private functions, functions defined
    // inside functions (decorators' wrappers) and the standard library's are glue, left out; where that
    // leaves nothing, the innermost library frame stands for them. At most kMostCalls, the middle elided
    // ("…").
    std::vector<std::string> calls;
    // Who called `own`, innermost first: the program's own frames, and between them the installed packages
    // whose frames lie there ("lightning"), each once a run. At most kMostCallers of the program's
    // frames; `callers_left_out` counts those past them.
    struct Caller {
        const ReportFrame* frame = nullptr; // null: `package` stands for library frames
        std::string package;
    };
    std::vector<Caller> callers;
    size_t callers_left_out = 0;
};
constexpr size_t kMostCalls = 4;
constexpr size_t kMostCallers = 4;

// The view of a stack; one without a frame of the program's own (`own` null) has only the calls it went
// through.
ProgramView program_view(const std::vector<ReportFrame>& frames);

// The program's line as a site's header reads it: where ("train.py:27", "train.py:88 in train_epoch",
// "cell [3], line 2": a module's code needs no function's name) and the line's text, empty where it is
// not known (then `where` is python_frame_name's).
struct ProgramLine {
    std::string where;
    std::string text;
};
ProgramLine program_line(const ReportFrame& frame);

// A path as the report shows it: a library file's from its package ("torch/nn/modules/linear.py"), a
// file under the working directory relative to it ("train.py" for /home/me/project/train.py run from
// /home/me/project), other paths as they are.
std::string short_path(const std::string& file);

// "train.py:88 in train_epoch"; without a line, "train.py in train_epoch". A frame of a named source (a
// notebook's cell) reads "cell [12], line 4 in <module> (`x = torch.empty(n)`)", the line's text shown
// where it is known.
std::string python_frame_name(const ReportFrame& frame);

} // namespace gpuleak::analyzer
