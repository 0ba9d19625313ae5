#include "launcher/interruption.h"

#include <csignal>

namespace gpuleak::launcher {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

void on_interrupt(int /*signal*/) {
    g_interrupted = 1;
}

} // namespace

void notice_interruptions() {
    struct sigaction action {};
    action.sa_handler = on_interrupt;
    action.sa_flags = SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, nullptr);
    ::sigaction(SIGTERM, &action, nullptr);
}

bool interrupted() {
    return g_interrupted != 0;
}

} // namespace gpuleak::launcher
