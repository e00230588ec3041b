// Hardening tests: bad input refused with one-line errors, no shell, limits, outputs, faults.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
