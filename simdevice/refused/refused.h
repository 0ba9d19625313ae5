// What each refusing stand-in includes after its library's headers.
#pragma once

#include "stand_in_library.h"

// The refused functions take their full parameter lists, which they never read, and the library's
// deprecated functions are stood in for like the rest.
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
