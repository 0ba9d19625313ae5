// A stack as the author of a Python program reads it (stack_view.h's program_view): their own line, what
// it called in libraries, who called it; the line's text from the file on disk; paths under the working
// directory relative to it; and the text report's site that leads with the line.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "python/source_files.h"
#include "render/wrapped_text.h"
#include "report/report.h"
#include "report/stack_view.h"
#include "temp_dir.h"

using namespace gpuleak::analyzer;

namespace {

const std::string kTorch = "/venv/lib/python3.12/site-packages/torch/";
const std::string kTransformers = "/venv/lib/python3.12/site-packages/transformers/";
const std::string kLightning = "/venv/lib/python3.12/site-packages/lightning/";

ReportFrame native(const std::string& function, const std::string& module = "/venv/libtorch_cpu.so") {
    return {function, {}, 0, module, 0x100, false, false, {}, {}};
}

ReportFrame python(const std::string& qualname, const std::string& file, uint32_t line = 10,
                   const std::string& source_line = {}) {
    return {qualname, file, line, {}, 0, false, true, {}, source_line};
}

// A GPT-2's forward pass, called by a training step, as PyTorch's allocator records it: innermost first.
std::vector<ReportFrame> model_call_stack() {
    return {
        native("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(int, unsigned long)",
               "/venv/libc10_cuda.so"),
        native("at::detail::empty_generic(...)"),
        native("at::_ops::empty_strided::call(...)"),
        native("at::_ops::mm::redispatch(...)"),
        native("at::_ops::mm::call(...)"),
        native("at::_ops::linear::call(...)"),
        native("torch::autograd::THPVariable_linear(_object*, _object*, _object*)",
               "/venv/libtorch_python.so"),
        native("_PyEval_EvalFrameDefault", "/usr/bin/python3.12"),
        python("Linear.forward", kTorch + "nn/modules/linear.py", 125),
        python("Module._call_impl", kTorch + "nn/modules/module.py", 1750),
        python("Module._wrapped_call_impl", kTorch + "nn/modules/module.py", 1739),
        python("GPT2Attention.forward", kTransformers + "models/gpt2/modeling_gpt2.py", 300),
        python("Module._call_impl", kTorch + "nn/modules/module.py", 1750),
        python("deprecate_kwarg.<locals>.wrapper", kTransformers + "utils/deprecation.py", 172),
        python("GPT2LMHeadModel.forward", kTransformers + "models/gpt2/modeling_gpt2.py", 1200),
        python("Module._call_impl", kTorch + "nn/modules/module.py", 1750),
        python("_GeneratorContextManager.__exit__", "/usr/lib/python3.12/contextlib.py", 144),
        python("train_step", "/home/me/project/train.py", 27, "outputs = model(input_ids, labels=labels)"),
        python("Loop.run", kLightning + "loops/loop.py", 40),
        python("Trainer.fit", kLightning + "trainer/trainer.py", 500),
        python("main", "/home/me/project/train.py", 60, "trainer.fit(module)"),
        python("<module>", "/home/me/project/train.py", 70, "main()"),
        python("_run_code", "/usr/lib/python3.12/runpy.py", 88),
        native("_start", "/usr/bin/python3.12"),
    };
}

} // namespace

TEST_CASE("a stack reads as the program's line, what it called in libraries, and who called it") {
    const std::vector<ReportFrame> frames = model_call_stack();
    const ProgramView view = program_view(frames);
    REQUIRE(view.own == &frames[17]);
    // One function per run of a package, its outermost public one; the operator that made the memory.
    CHECK(view.calls ==
          std::vector<std::string>{"transformers GPT2LMHeadModel.forward", "torch Linear.forward", "mm"});
    REQUIRE(view.callers.size() == 3);
    CHECK(view.callers[0].frame == nullptr);
    CHECK(view.callers[0].package == "lightning");
    CHECK(view.callers[1].frame == &frames[20]);
    CHECK(view.callers[2].frame == &frames[21]);
    CHECK(view.callers_left_out == 0);
}

TEST_CASE("a library's glue never names a call: private functions, wrappers, the standard library") {
    SECTION("a stack through private functions only is named by its innermost library frame") {
        const std::vector<ReportFrame> frames = {
            python("Module._apply", kTorch + "nn/modules/module.py", 900),
            python("_GeneratorContextManager.__enter__", "/usr/lib/python3.12/contextlib.py", 137),
            python("<module>", "/home/me/train.py", 3),
        };
        CHECK(program_view(frames).calls == std::vector<std::string>{"torch Module._apply"});
    }
    SECTION("a dunder method is public") {
        const std::vector<ReportFrame> frames = {
            python("TensorDataset.__getitem__", kTorch + "utils/data/dataset.py", 211),
            python("<module>", "/home/me/train.py", 3),
        };
        CHECK(program_view(frames).calls == std::vector<std::string>{"torch TensorDataset.__getitem__"});
    }
    SECTION("an operator that only makes an empty tensor is named where no other made the memory") {
        const std::vector<ReportFrame> frames = {
            native("at::_ops::empty_memory_format::call(...)"),
            native("torch::autograd::THPVariable_empty(...)"),
            python("<module>", "/home/me/train.py", 3),
        };
        CHECK(program_view(frames).calls == std::vector<std::string>{"empty_memory_format"});
    }
    SECTION("a ctypes call into CUDA names nothing") {
        const std::vector<ReportFrame> frames = {
            native("ffi_call", "/usr/lib/libffi.so.8"),
            python("<module>", "/home/me/train.py", 3),
        };
        CHECK(program_view(frames).calls.empty());
    }
}

TEST_CASE("a long chain of libraries keeps its ends") {
    std::vector<ReportFrame> frames = {native("at::_ops::addmm::call(...)")};
    for (const char* package : {"e", "d", "c", "b", "a"})
        frames.push_back(python("f", std::string("/venv/lib/python3.12/site-packages/") + package + "/m.py"));
    frames.push_back(python("<module>", "/home/me/train.py", 3));
    CHECK(program_view(frames).calls == std::vector<std::string>{"a f", "b f", "…", "addmm"});
}

TEST_CASE("the callers past the fourth are counted, and a runner outside the program is none") {
    std::vector<ReportFrame> frames = {python("leaf", "/home/me/train.py", 1)};
    for (int i = 0; i < 6; ++i)
        frames.push_back(python("f" + std::to_string(i), "/home/me/train.py", 2 + i));
    frames.push_back(python("main", kLightning + "cli.py", 9));
    const ProgramView view = program_view(frames);
    REQUIRE(view.callers.size() == kMostCallers);
    CHECK(view.callers.back().frame == &frames[4]);
    CHECK(view.callers_left_out == 2);
}

TEST_CASE("a stack without the program's frames has only the calls it went through") {
    const std::vector<ReportFrame> frames = {
        native("at::_ops::mm::call(...)"),
        native("torch::autograd::python::PythonEngine::thread_init(int, ...)", "/venv/libtorch_python.so"),
    };
    const ProgramView view = program_view(frames);
    CHECK(view.own == nullptr);
    CHECK(view.calls == std::vector<std::string>{"mm"});
    CHECK(view.callers.empty());
}

TEST_CASE("the program's line reads with its text, a module's code without its function's name") {
    const auto line = [](const ReportFrame& frame) {
        const auto [where, text] = program_line(frame);
        return where + "|" + text;
    };
    CHECK(line(python("<module>", "/srv/train.py", 27, "loss = criterion(model(x), y)")) ==
          "/srv/train.py:27|loss = criterion(model(x), y)");
    CHECK(line(python("Trainer.step", "/srv/train.py", 88, "loss.backward()")) ==
          "/srv/train.py:88 in Trainer.step|loss.backward()");
    CHECK(line(python("Trainer.step", "/srv/train.py", 88)) == "/srv/train.py:88 in Trainer.step|");
    ReportFrame cell = python("<module>", "/tmp/ipykernel_7/11.py", 2, "held.append(x)");
    cell.source_name = "cell [3]";
    CHECK(line(cell) == "cell [3], line 2|held.append(x)");
}

TEST_CASE("a file under the working directory is shown relative to it, a package's file from the package") {
    const std::string here = std::filesystem::current_path().string();
    CHECK(short_path(here + "/scripts/train.py") == "scripts/train.py");
    CHECK(python_frame_name(python("<module>", here + "/train.py", 3)) == "train.py:3 in <module>");
    CHECK(short_path(kTorch + "nn/modules/linear.py") == "torch/nn/modules/linear.py");
    // Not a prefix of a name: /home/me/project2 is not under /home/me/project.
    CHECK(short_path(here + "2/train.py") == here + "2/train.py");
}

TEST_CASE("a source line is read from the file on disk, and nothing from what is not a source file") {
    const TempDir directory;
    const std::string path = directory.path() + "/train.py";
    std::ofstream(path) << "import torch\n\n    loss = criterion(model(x), y)   \r\n";
    SourceFiles files;
    CHECK(files.line(path, 3) == "loss = criterion(model(x), y)");
    CHECK(files.line(path, 2).empty());
    CHECK(files.line(path, 4).empty());
    CHECK(files.line(path, 0).empty());
    CHECK(files.line(directory.path() + "/missing.py", 1).empty());
    CHECK(files.line(directory.path(), 1).empty());
    const std::string fifo = directory.path() + "/fifo.py";
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(files.line(fifo, 1).empty()); // never opened: it would block
}

TEST_CASE("a paragraph is wrapped at 100 columns counted in characters") {
    // 100 characters, 104 bytes: one line.
    const std::string arrows = std::string(30, 'x') + " → " + std::string(61, 'y') + " → z";
    CHECK(wrapped(arrows, "  ", "> ") == "> " + arrows + "\n");
    CHECK(wrapped(arrows + " w", "  ", "> ") == "> " + arrows + "\n  w\n");
    const std::string path = "/" + std::string(150, 'p');
    CHECK(wrapped("see " + path + " now", "  ") == "  see\n  " + path + "\n  now\n");
}

TEST_CASE("a figure and its percent sign move to the next line together") {
    const std::string text = std::string(93, 'a') + " (93 %)";
    CHECK(wrapped(text, "  ") == "  " + std::string(93, 'a') + "\n  (93 %)\n");
}

TEST_CASE("a library that runs the program's code from outside it calls nothing of the program's") {
    // A launcher's entry point outermost of all: no caller of the program's line.
    const std::vector<ReportFrame> frames = {
        python("train_step", "/home/me/train.py", 27),
        python("Trainer.fit", kLightning + "trainer/trainer.py", 500),
        python("main", kLightning + "cli.py", 9),
    };
    const ProgramView view = program_view(frames);
    REQUIRE(view.own == &frames[0]);
    CHECK(view.callers.empty());
}

TEST_CASE("a source line is read only from a whole path, and kept to a bounded length") {
    const TempDir directory;
    const std::string path = directory.path() + "/train.py";
    std::ofstream(path) << "x = [" << std::string(5000, '1') << "]\n";
    SourceFiles files;
    CHECK(files.line(path, 1).size() == kMostLineBytes);
    // A relative name is relative to where the program ran, which the report does not know.
    CHECK(files.line("train.py", 1).empty());
}
