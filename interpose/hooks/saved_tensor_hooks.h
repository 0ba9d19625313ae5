// Whether PyTorch's saved-tensor hooks were ever set in this process (torch.autograd.graph's
// saved_tensors_hooks, which torch.utils.checkpoint, save_on_cpu and FSDP's offloading use, and a saved
// tensor's register_hooks). Reading a tensor that an autograd node saved runs its unpack hook, the
// program's code (a checkpoint recomputes its forward pass, save_on_cpu copies to the device): gpuleak.why()
// reads saved tensors at a moment the program did not ask about only where none was ever set. libgpuleak
// stands in for the two functions of libtorch_cpu.so that set them, and calls them.
#pragma once

namespace gpuleak {

enum class SavedTensorHooks : int {
    Unknown = -1, // the PyTorch in the process does not have the functions gpuleak stands in for
    NeverSet = 0,
    Set = 1,
};

SavedTensorHooks saved_tensor_hooks();

} // namespace gpuleak
