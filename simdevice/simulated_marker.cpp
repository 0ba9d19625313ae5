#include "sim_export.h"

extern "C" {
const char gpuleak_simulated_device[] = "gpuleak simulated CUDA device";
}
