#define CATCH_CONFIG_MAIN
// Catch's own handlers for fatal signals would stand in for the default actions that gpuleak's tests
// observe (a recorder only takes over signals the program left at their defaults).
#define CATCH_CONFIG_NO_POSIX_SIGNALS
#include <catch2/catch.hpp>
